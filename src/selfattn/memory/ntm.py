"""Neural Turing machine memory (Graves, Wayne & Danihelka 2014; lecture 003, "Neural
Turing Machine"): attention that reads from *and writes to* a memory of N vectors.

Each head turns the controller's output into an attention weighting w over the N slots in
four steps (§3.3):

1. content addressing: w^c_i = softmax_i(β · cos(k, M_i)) — match a key against every slot;
2. interpolation: w^g = g w^c + (1 − g) w_{t−1} — keep the last focus, or move to content;
3. convolutional shift: w̃_i = Σ_j w^g_j s_{i−j} — move the focus by −1, 0 or +1 slots;
4. sharpening: w_i = w̃_i^γ / Σ_j w̃_j^γ, γ ≥ 1 — undo the blur of the shift.

A read head returns r = Σ_i w_i M_i; a write head erases, then adds (§3.2):
M_i ← M_i ∘ (1 − w_i e) + w_i a. The lecture's m^i_t, e and a are these M_i, e and a.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

#: The shifts a head may make, slots: −1, 0, +1.
SHIFTS = (-1, 0, 1)


def content_weights(memory: Tensor, key: Tensor, strength: Tensor) -> Tensor:
    """``(B, N)`` softmax over slots of ``strength`` · cosine(``key``, slot).

    Args:
        memory: ``(B, N, M)``.
        key: ``(B, M)``.
        strength: ``(B,)`` β ≥ 0.
    """
    similarity = F.cosine_similarity(memory, key.unsqueeze(1), dim=-1, eps=1e-8)
    return (strength.unsqueeze(1) * similarity).softmax(-1)


def shift_weights(weights: Tensor, shift: Tensor) -> Tensor:
    """Circular convolution of ``(B, N)`` weights with ``(B, len(SHIFTS))`` shift weights:
    all of the mass at +1 moves each slot's weight to the next slot (N − 1 wraps to 0)."""
    rolled = torch.stack([weights.roll(offset, dims=1) for offset in SHIFTS], dim=-1)
    return (rolled * shift.unsqueeze(1)).sum(-1)


def sharpen(weights: Tensor, gamma: Tensor) -> Tensor:
    """``w^γ / Σ w^γ`` per row (``gamma`` ``(B,)`` ≥ 1)."""
    powered = weights.clamp(min=1e-12) ** gamma.unsqueeze(1)
    return powered / powered.sum(-1, keepdim=True)


def address(
    memory: Tensor,
    previous: Tensor,
    key: Tensor,
    strength: Tensor,
    gate: Tensor,
    shift: Tensor,
    gamma: Tensor,
) -> Tensor:
    """The four addressing steps: ``(B, N)`` weights that sum to 1.

    Args:
        memory: ``(B, N, M)``.
        previous: ``(B, N)`` the head's last weights.
        key, strength: content addressing (``(B, M)``, ``(B,)``).
        gate: ``(B,)`` g in [0, 1]: 1 content, 0 the previous weights.
        shift: ``(B, 3)`` a distribution over shifts −1, 0, +1.
        gamma: ``(B,)`` sharpening γ ≥ 1.
    """
    content = content_weights(memory, key, strength)
    gated = gate.unsqueeze(1) * content + (1 - gate.unsqueeze(1)) * previous
    return sharpen(shift_weights(gated, shift), gamma)


def read(memory: Tensor, weights: Tensor) -> Tensor:
    """``(B, M)``: Σ_i w_i M_i."""
    return torch.einsum("bn,bnm->bm", weights, memory)


def write(memory: Tensor, weights: Tensor, erase: Tensor, add: Tensor) -> Tensor:
    """The memory after erasing ``erase`` ``(B, M)`` in [0, 1] and adding ``add``
    ``(B, M)`` where ``weights`` ``(B, N)`` point."""
    w = weights.unsqueeze(-1)  # (B, N, 1)
    return memory * (1 - w * erase.unsqueeze(1)) + w * add.unsqueeze(1)


class Head(nn.Module):
    """One read or write head: the controller's state → its addressing parameters (and,
    for a write head, erase and add vectors).

    Args:
        hidden: the controller's output size.
        width: M, the memory's vector size.
        writes: a write head (erase and add vectors too).
    """

    def __init__(self, hidden: int, width: int, *, writes: bool) -> None:
        super().__init__()
        self.width, self.writes = width, writes
        # key, β, g, shift (3), γ; erase and add for a write head
        size = width + 1 + 1 + len(SHIFTS) + 1 + (2 * width if writes else 0)
        self.proj = nn.Linear(hidden, size)

    def forward(
        self, state: Tensor, memory: Tensor, previous: Tensor
    ) -> tuple[Tensor, Tensor | None, Tensor | None]:
        """``(weights, erase, add)`` for controller ``state`` ``(B, hidden)``."""
        out = self.proj(state)
        m = self.width
        key, rest = out[:, :m], out[:, m:]
        strength = F.softplus(rest[:, 0])
        gate = torch.sigmoid(rest[:, 1])
        shift = rest[:, 2 : 2 + len(SHIFTS)].softmax(-1)
        gamma = 1 + F.softplus(rest[:, 2 + len(SHIFTS)])
        weights = address(memory, previous, key, strength, gate, shift, gamma)
        if not self.writes:
            return weights, None, None
        tail = rest[:, 3 + len(SHIFTS) :]
        return weights, torch.sigmoid(tail[:, :m]), tail[:, m:]


@dataclass
class NTMState:
    """What the machine carries from one step to the next."""

    memory: Tensor  # (B, N, M)
    read_weights: Tensor  # (B, N)
    write_weights: Tensor  # (B, N)
    read: Tensor  # (B, M): the last read vector
    controller: tuple[Tensor, Tensor]  # the LSTM's (h, c)


class NTM(nn.Module):
    """A neural Turing machine with an LSTM controller, one read head and one write head.

    Each step the controller reads the input and the last read vector; the write head
    changes the memory, the read head reads it, and the output is a linear map of the
    controller's state and the new read vector.

    Args:
        input_size: features per input step.
        output_size: features per output step (logits).
        hidden: the LSTM controller's size.
        slots: N, memory vectors.
        width: M, each vector's size.
    """

    def __init__(
        self,
        input_size: int,
        output_size: int,
        *,
        hidden: int = 100,
        slots: int = 128,
        width: int = 20,
    ) -> None:
        super().__init__()
        self.slots, self.width = slots, width
        self.controller = nn.LSTMCell(input_size + width, hidden)
        self.read_head = Head(hidden, width, writes=False)
        self.write_head = Head(hidden, width, writes=True)
        self.out = nn.Linear(hidden + width, output_size)
        self.initial_memory = nn.Parameter(torch.full((slots, width), 1e-6))
        self.initial_read = nn.Parameter(torch.zeros(width))

    def initial_state(self, batch: int) -> NTMState:
        """The state before the first step: a near-empty memory, focus on slot 0."""
        device = self.initial_memory.device
        focus = torch.zeros(batch, self.slots, device=device)
        focus[:, 0] = 1.0
        hidden = self.controller.hidden_size
        zeros = torch.zeros(batch, hidden, device=device)
        return NTMState(
            self.initial_memory.expand(batch, -1, -1),
            focus,
            focus.clone(),
            self.initial_read.expand(batch, -1),
            (zeros, zeros.clone()),
        )

    def step(self, x: Tensor, state: NTMState) -> tuple[Tensor, NTMState]:
        """One step: input ``(B, input_size)`` → output ``(B, output_size)`` and the new state."""
        h, c = self.controller(torch.cat([x, state.read], dim=-1), state.controller)
        write_weights, erase, add = self.write_head(h, state.memory, state.write_weights)
        assert erase is not None and add is not None
        memory = write(state.memory, write_weights, erase, add)
        read_weights, _, _ = self.read_head(h, memory, state.read_weights)
        vector = read(memory, read_weights)
        out = self.out(torch.cat([h, vector], dim=-1))
        return out, NTMState(memory, read_weights, write_weights, vector, (h, c))

    def forward(self, inputs: Tensor) -> tuple[Tensor, list[Tensor]]:
        """``(B, T, input_size)`` → ``(B, T, output_size)`` outputs and, per step, the
        read head's ``(B, N)`` weights (where it looked)."""
        state = self.initial_state(inputs.shape[0])
        outputs, looks = [], []
        for t in range(inputs.shape[1]):
            out, state = self.step(inputs[:, t], state)
            outputs.append(out)
            looks.append(state.read_weights)
        return torch.stack(outputs, dim=1), looks
