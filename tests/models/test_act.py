"""Adaptive depth (ACT, :mod:`selfattn.models.act`): the fixed-depth limit, the halting
weights, frozen halted positions, padding, and the ponder cost.

The equality with the fixed-depth shared-weight encoder holds exactly when every halting
probability before the last step is 0 (then nothing halts early, R = 1 at step M and the
output is the last state), the step signal is zero, and positions are none or relative
(an absolute encoding is added once by the encoder, at every step by ACT). In float64 a
halting bias of −1000 makes σ underflow to exactly 0.
"""

from __future__ import annotations

import copy
import math

import pytest
import torch
from torch import Tensor, nn

from selfattn.models import Conformer, Encoder, StackConfig
from selfattn.models.act import AdaptiveDepth, ponder_penalty
from selfattn.models.encoder import BlockStack

E, HEADS, FFN, STEPS = 16, 2, 32, 4
LENGTHS = [6, 4, 2]


def _stack(kind: type[BlockStack] = Encoder, positional: str | None = None) -> BlockStack:
    torch.manual_seed(0)
    config = StackConfig(
        E, HEADS, FFN, dropout=0.0, num_layers=STEPS, share_weights=True, positional=positional
    )
    return kind(config).double().eval()


def _inputs() -> tuple[Tensor, Tensor]:
    """``(B, L, E)`` float64 vectors and the padding mask of :data:`LENGTHS`."""
    generator = torch.Generator().manual_seed(1)
    x = torch.randn(len(LENGTHS), max(LENGTHS), E, generator=generator, dtype=torch.float64)
    padding = torch.arange(max(LENGTHS))[None, :] >= torch.tensor(LENGTHS)[:, None]
    return x, padding


def _act(stack: BlockStack, *, bias: float | None = None, scale: float = 1.0) -> AdaptiveDepth:
    """ACT around a copy of ``stack``; ``bias`` with a zero weight makes every halting
    probability σ(bias); else the unit's weights are random, times ``scale``."""
    act = AdaptiveDepth(copy.deepcopy(stack)).double().eval()
    with torch.no_grad():
        if bias is not None:
            act.halting.weight.zero_()
            act.halting.bias.fill_(bias)
        else:
            torch.manual_seed(2)
            nn.init.normal_(act.halting.weight, std=scale)
            act.halting.bias.zero_()
    return act


@pytest.mark.parametrize(
    ("kind", "positional"), [(Encoder, None), (Encoder, "rotary"), (Conformer, None)]
)
def test_unreachable_threshold_equals_the_fixed_depth_shared_encoder(
    kind: type[BlockStack], positional: str | None
) -> None:
    stack = _stack(kind, positional)
    x, padding = _inputs()
    act = _act(stack, bias=-1000.0)
    act.step_signal.zero_()
    with torch.no_grad():
        fixed = stack(x, key_padding_mask=padding).last_hidden_state
        out = act(x, key_padding_mask=padding)
    real = ~padding
    assert out.ponder is not None
    assert torch.equal(out.ponder.steps[real], torch.full_like(out.ponder.steps[real], STEPS))
    assert torch.equal(out.ponder.remainders[real], torch.ones_like(out.ponder.remainders[real]))
    assert torch.equal(out.last_hidden_state[real], fixed[real])
    # Not vacuous: the step signal, or a reachable threshold, changes the output.
    act.step_signal.copy_(AdaptiveDepth(copy.deepcopy(stack)).step_signal)
    with torch.no_grad():
        assert not torch.allclose(
            act(x, key_padding_mask=padding).last_hidden_state[real], fixed[real]
        )
        act.step_signal.zero_()
        act.halting.bias.fill_(0.0)
        assert not torch.allclose(
            act(x, key_padding_mask=padding).last_hidden_state[real], fixed[real]
        )


def test_halting_weights_sum_to_one_per_position() -> None:
    act = _act(_stack(), scale=3.0)
    x, padding = _inputs()
    with torch.no_grad():
        ponder = act(x, key_padding_mask=padding).ponder
    assert ponder is not None
    real = ~padding
    total = ponder.weights.sum(-1)
    torch.testing.assert_close(total[real], torch.ones_like(total[real]))
    assert torch.equal(ponder.weights[padding], torch.zeros_like(ponder.weights[padding]))
    assert (ponder.weights >= 0).all()
    # A step's weight is zero after the position's halting step N.
    taken = torch.arange(1, ponder.weights.shape[-1] + 1, dtype=torch.float64)
    after = taken > ponder.steps[..., None]
    assert torch.equal(ponder.weights[after], torch.zeros_like(ponder.weights[after]))
    assert ((ponder.steps[real] >= 1) & (ponder.steps[real] <= STEPS)).all()
    assert len(set(ponder.steps[real].tolist())) > 1  # positions halt at different steps


def test_positions_that_halted_stop_changing() -> None:
    """Perturbing every state after step k changes nothing at positions that halted by k."""
    act = _act(_stack(), scale=3.0)
    x, padding = _inputs()
    with torch.no_grad():
        out = act(x, key_padding_mask=padding)
    assert out.ponder is not None
    k = 2
    calls = 0

    def perturb(
        _module: nn.Module, _inputs: object, output: tuple[Tensor, Tensor | None]
    ) -> object:
        nonlocal calls
        calls += 1
        if calls <= k:
            return None
        return output[0] + 10.0 * torch.randn_like(output[0]), output[1]

    handle = act.stack.layers[0].register_forward_hook(perturb)
    try:
        with torch.no_grad():
            perturbed = act(x, key_padding_mask=padding).last_hidden_state
    finally:
        handle.remove()
    halted = (out.ponder.steps <= k) & ~padding
    later = (out.ponder.steps > k) & ~padding
    assert halted.any() and later.any()
    assert torch.equal(perturbed[halted], out.last_hidden_state[halted])
    assert not torch.allclose(perturbed[later], out.last_hidden_state[later])


def test_padding_does_not_change_real_positions() -> None:
    act = _act(_stack(Encoder, "sinusoidal"), scale=3.0)
    x, padding = _inputs()
    with torch.no_grad():
        batched = act(x, key_padding_mask=padding)
        assert batched.ponder is not None
        for row, length in enumerate(LENGTHS):
            alone = act(x[row : row + 1, :length])
            assert alone.ponder is not None
            torch.testing.assert_close(
                batched.last_hidden_state[row, :length], alone.last_hidden_state[0]
            )
            assert torch.equal(batched.ponder.steps[row, :length], alone.ponder.steps[0])
        # Garbage in the padding changes nothing at real positions.
        noisy = x.masked_fill(padding[..., None], 1e3)
        again = act(noisy, key_padding_mask=padding).last_hidden_state
    torch.testing.assert_close(again[~padding], batched.last_hidden_state[~padding])


@pytest.mark.parametrize(
    ("p", "steps", "remainder"),
    [
        (0.4, 3, 1 - 2 * 0.4),  # 0.4 + 0.4 < 0.99 ≤ 0.4 + 0.4 + 0.4: halts at step 3
        (0.1, STEPS, 1 - 3 * 0.1),  # never reaches 0.99: stops at M with the rest
        (0.995, 1, 1.0),  # over the threshold at once: one step, R = 1
    ],
)
def test_ponder_cost_is_steps_plus_remainder(p: float, steps: int, remainder: float) -> None:
    act = _act(_stack(), bias=math.log(p / (1 - p)))
    act.ponder_weight = 0.05
    x, padding = _inputs()
    out = act(x, key_padding_mask=padding)
    assert out.ponder is not None
    real = ~padding
    expected = [p] * (steps - 1) + [remainder]
    torch.testing.assert_close(
        out.ponder.weights[real],
        torch.tensor(expected, dtype=torch.float64).expand(int(real.sum()), -1),
    )
    assert torch.equal(out.ponder.steps[real], torch.full_like(out.ponder.steps[real], steps))
    torch.testing.assert_close(
        out.ponder.cost[real], torch.full_like(out.ponder.cost[real], steps + remainder)
    )
    assert torch.equal(out.ponder.cost[padding], torch.zeros_like(out.ponder.cost[padding]))
    penalty = ponder_penalty(act)
    assert isinstance(penalty, Tensor)
    torch.testing.assert_close(
        penalty, torch.tensor(0.05 * (steps + remainder), dtype=torch.float64)
    )
    # Only R carries a gradient: dρ/db = −(N − 1)·p(1 − p), N having none.
    if steps == 1:  # R = 1 − 0: nothing to differentiate
        assert not penalty.requires_grad
        return
    penalty.backward()
    assert act.halting.bias.grad is not None
    torch.testing.assert_close(
        act.halting.bias.grad[0],
        torch.tensor(-0.05 * (steps - 1) * p * (1 - p), dtype=torch.float64),
    )


def test_refuses_a_stack_without_shared_weights() -> None:
    stack = Encoder(StackConfig(E, HEADS, FFN, num_layers=2))
    with pytest.raises(ValueError, match="share_weights = true") as error:
        AdaptiveDepth(stack)
    assert "\n" not in str(error.value)


def test_no_penalty_without_adaptive_depth() -> None:
    assert ponder_penalty(_stack()) == 0.0
