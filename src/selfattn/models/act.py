"""Adaptive depth: the Universal Transformer with Adaptive Computation Time (lecture 003).

Graves 2016, "Adaptive Computation Time for Recurrent Neural Networks" (§2), as Dehghani
et al. 2019, "Universal Transformers" (§2.2), use it per position. One shared block is
applied up to M = ``num_layers`` times. At step n every running position i gets a
halting probability from a sigmoid unit on the state the step produced,

    p_i^n = σ(w · s_i^n + b),

and halts at the first step N_i where Σ_{n ≤ N_i} p_i^n ≥ 1 − ε (ε = 0.01), or at M. Its
remainder is R_i = 1 − Σ_{n < N_i} p_i^n, its halting weights are p_i^n for n < N_i and R_i
at N_i (they sum to 1), and its output is the halting-weighted mean of its states,
Σ_n w_i^n s_i^n. The ponder cost ρ_i = N_i + R_i is added to the loss with a weight
(``model.ponder_weight``, mean over real positions); only R carries a gradient, which
pushes the probabilities of the steps before halting up, i.e. halting earlier.

Positions that have halted stop changing: from then on their state is their output, which
the running positions still attend to, and the block's later outputs there are discarded.
The step's input is the state plus a coordinate signal, as in Dehghani et al.: the
sinusoidal signal of the step n (1 … M) and, with an absolute positional encoding, the
position signal, both added at every step. The loop ends when every real position has
halted (an exported model runs all M steps, to the same result).

With ``p_i^n = 0`` for every n < M (the threshold unreachable: every position runs the M
steps and halts at M with R = 1), a zero step signal and no absolute positions (none, or
relative ones, which act inside the shared block), the output is the M-step shared-weight
:class:`~selfattn.models.Encoder`'s (or :class:`~selfattn.models.Conformer`'s) at every
real position, exactly (``tests/models/test_act.py``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Unpack

import torch
from torch import Tensor, nn

from selfattn.attention.masks import MaskArgs
from selfattn.models.checkpointing import run_block
from selfattn.models.encoder import BlockStack, EncoderOutput
from selfattn.positional.sinusoidal import sinusoidal_table

#: Graves's ε: a position halts once its probabilities sum to at least 1 − ε.
HALTING_EPSILON = 0.01
#: The halting unit's initial bias (Graves §2: positive, so that early steps halt soon;
#: tensor2tensor's UT uses 1.0): p ≈ 0.73 at first, so about two steps.
HALTING_BIAS = 1.0


@dataclass
class Ponder:
    """What the halting decided, per position.

    Attributes:
        weights: ``(B, L, n)`` the halting weight of each step run (n ≤ M): p before the
            halting step, R at it, 0 after it and at padding.
        steps: ``(B, L)`` N, the steps each position used (0 at padding).
        remainders: ``(B, L)`` R (0 at padding).
        real: ``(B, L)`` True at real positions.
    """

    weights: Tensor
    steps: Tensor
    remainders: Tensor
    real: Tensor

    @property
    def cost(self) -> Tensor:
        """``(B, L)`` the ponder cost ρ = N + R (0 at padding)."""
        return self.steps + self.remainders

    def mean_cost(self) -> Tensor:
        """ρ averaged over real positions: the term the loss adds, times its weight."""
        return self.cost.sum() / self.real.sum().clamp(min=1)


@dataclass
class ACTOutput(EncoderOutput):
    """:class:`~selfattn.models.EncoderOutput` of an adaptive-depth stack: hidden states
    are the input, then the state after each step run; attentions are per step run.

    Attributes:
        ponder: what the halting decided.
    """

    ponder: Ponder | None = None


class AdaptiveDepth(nn.Module):
    """A shared-weight stack of blocks run with ACT halting, called like the stack.

    Args:
        stack: an :class:`~selfattn.models.Encoder` or :class:`~selfattn.models.Conformer`
            with ``share_weights``; its ``num_layers`` is the maximum number of steps M,
            its absolute positions, embedding dropout and final norm are used as they are.
        ponder_weight: τ, the weight of the mean ponder cost in the loss
            (:func:`ponder_penalty`).
        epsilon: ε of the halting threshold 1 − ε.

    Attributes:
        last_ponder: the :class:`Ponder` of the latest forward pass (the loss and the
            development metrics read it), ``None`` before one.

    Raises:
        ValueError: the stack does not share its weights.
    """

    def __init__(
        self, stack: BlockStack, *, ponder_weight: float = 0.01, epsilon: float = HALTING_EPSILON
    ) -> None:
        super().__init__()
        config = stack.config
        if not config.share_weights:
            raise ValueError(
                "adaptive depth (ACT) needs share_weights = true: one block applied up to "
                "num_layers times"
            )
        self.stack = stack
        self.max_steps = config.num_layers
        self.ponder_weight = ponder_weight
        self.epsilon = epsilon
        self.halting = nn.Linear(config.embed_dim, 1)
        nn.init.constant_(self.halting.bias, HALTING_BIAS)
        table = sinusoidal_table(self.max_steps, config.embed_dim + 1, offset=1)
        #: ``(M, E)`` the signal of steps 1 … M.
        self.step_signal: Tensor
        self.register_buffer("step_signal", table[:, : config.embed_dim], persistent=False)
        self.last_ponder: Ponder | None = None

    def extra_repr(self) -> str:
        return (
            f"max_steps={self.max_steps}, epsilon={self.epsilon}, "
            f"ponder_weight={self.ponder_weight}"
        )

    def forward(
        self,
        x: Tensor,
        *,
        need_weights: bool = False,
        **masks: Unpack[MaskArgs],
    ) -> ACTOutput:
        """Args: as :meth:`~selfattn.models.encoder.BlockStack.forward`.

        Returns:
            An :class:`ACTOutput`; ``last_hidden_state`` ``(B, L, E)`` is each position's
            halting-weighted mean state (0 before the final norm at padding).
        """
        stack = self.stack
        batch, length, _ = x.shape
        signal = self.step_signal.to(x.dtype)[:, None, :]  # (M, 1, E)
        if stack.absolute is not None:
            signal = signal + stack.absolute.encoding(length).to(x)  # (M, L, E)
        real = (
            torch.ones(batch, length, dtype=torch.bool, device=x.device)
            if (key_padding_mask := masks.get("key_padding_mask")) is None
            else ~key_padding_mask
        )
        state = stack.embed_dropout(x)
        output = torch.zeros_like(state)
        running = real
        cumulative = x.new_zeros(batch, length)  # Σ p of the steps before this one
        steps, remainders = x.new_zeros(batch, length), x.new_zeros(batch, length)
        weights: list[Tensor] = []
        hidden_states, attentions = [state], []
        for step in range(self.max_steps):
            new, step_weights = run_block(
                stack,
                stack.layers[step],
                state + signal[step],
                need_weights=need_weights,
                **masks,
            )
            p = torch.sigmoid(self.halting(new)).squeeze(-1)  # (B, L)
            if step == self.max_steps - 1:
                halting = running
            else:
                halting = running & (cumulative + p >= 1 - self.epsilon)
            going_on = running & ~halting
            remainder = 1 - cumulative
            weight = torch.where(going_on, p, torch.where(halting, remainder, 0.0))
            output = output + weight[..., None] * new
            remainders = torch.where(halting, remainder, remainders)
            steps = steps + running.to(steps.dtype)
            cumulative = cumulative + torch.where(going_on, p, 0.0)
            # Running positions carry the new state on; halted ones are their output.
            state = torch.where(
                going_on[..., None], new, torch.where(halting[..., None], output, state)
            )
            running = going_on
            weights.append(weight)
            hidden_states.append(state)
            if step_weights is not None:
                attentions.append(step_weights)
            # Stopping early only saves time (halted positions are frozen); an exported
            # graph cannot branch on data, so it always runs the M steps.
            if not torch.compiler.is_exporting() and not bool(running.any()):
                break
        if stack.norm is not None:
            output = stack.norm(output)
        ponder = Ponder(torch.stack(weights, dim=-1), steps, remainders, real)
        self.last_ponder = ponder
        return ACTOutput(output, hidden_states, attentions if need_weights else None, ponder)


def adaptive_depths(model: nn.Module) -> list[AdaptiveDepth]:
    """Every :class:`AdaptiveDepth` inside ``model``."""
    return [module for module in model.modules() if isinstance(module, AdaptiveDepth)]


def ponder_penalty(model: nn.Module) -> Tensor | float:
    """τ · mean ρ of each :class:`AdaptiveDepth` in ``model`` after its latest forward pass,
    summed: what a task adds to its loss (0 for a model without adaptive depth)."""
    total: Tensor | float = 0.0
    for module in adaptive_depths(model):
        if module.last_ponder is not None:
            total = total + module.ponder_weight * module.last_ponder.mean_cost()
    return total


class PonderMeter:
    """Mean steps N and ponder cost N + R over the real positions of many forward passes
    of ``model`` (the development metrics ``ponder_steps`` and ``ponder_cost``)."""

    def __init__(self, model: nn.Module) -> None:
        self.modules = adaptive_depths(model)
        self.steps, self.cost, self.positions = 0.0, 0.0, 0

    def add(self) -> None:
        """Count the latest forward pass."""
        for module in self.modules:
            ponder = module.last_ponder
            if ponder is not None:
                self.steps += float(ponder.steps.sum())
                self.cost += float(ponder.cost.sum())
                self.positions += int(ponder.real.sum())

    def metrics(self) -> dict[str, float]:
        """``{"ponder_steps", "ponder_cost"}``, or ``{}`` for a model without ACT."""
        if not self.modules:
            return {}
        positions = max(self.positions, 1)
        return {"ponder_steps": self.steps / positions, "ponder_cost": self.cost / positions}
