"""Location-aware and forward alignments (selfattn.attention.alignment): what the math
guarantees, checked against float64 references written from the papers' definitions."""

from __future__ import annotations

import itertools

import pytest
import torch

from selfattn.attention.alignment import Alignment, AlignmentConfig

pytestmark = pytest.mark.usefixtures("one_thread")


def _scores(batch: int, heads: int, steps: int, length: int, padding: torch.Tensor) -> torch.Tensor:
    scores = torch.randn(batch, heads, steps, length, dtype=torch.float64) * 2
    return scores.masked_fill(padding[:, None, None, :], float("-inf"))


def _path_posterior(y: torch.Tensor, advance: int) -> torch.Tensor:
    """Zhang et al.'s α̂_t by brute force: every monotonic path π_{-1} = 0, π_t − π_{t-1} ∈
    {0 … advance}, weighted by Π_k y_k(π_k); α̂_t(n) is the weight of the paths at n at t,
    normalised. ``y`` ``(T, S)`` content attentions → ``(T, S)``."""
    steps, length = y.shape
    out = torch.zeros(steps, length, dtype=torch.float64)
    for t in range(steps):
        for moves in itertools.product(range(advance + 1), repeat=t + 1):
            positions = list(itertools.accumulate(moves))
            if positions[-1] >= length:
                continue
            weight = torch.prod(torch.stack([y[k, n] for k, n in enumerate(positions)]))
            out[t, positions[-1]] += weight
    return out / out.sum(-1, keepdim=True)


@pytest.mark.parametrize("advance", [1, 2])
def test_forward_attention_is_the_posterior_over_monotonic_paths(advance: int) -> None:
    padding = torch.zeros(2, 6, dtype=torch.bool)
    padding[1, 4:] = True
    scores = _scores(2, 2, 4, 6, padding)
    weights, last = Alignment(AlignmentConfig("forward", max_advance=advance), 8)(
        scores, padding, None
    )
    y = torch.softmax(scores, dim=-1)  # the content attention y_t
    for b, h in itertools.product(range(2), range(2)):
        torch.testing.assert_close(weights[b, h], _path_posterior(y[b, h], advance))
    torch.testing.assert_close(last, weights[:, :, -1])


def test_forward_attention_support_and_its_limits() -> None:
    """Step t (0-based) reaches at most source position (t + 1)·m and, the softmax being
    positive, reaches every real position up to there; rows sum to 1, padding gets 0."""
    padding = torch.zeros(3, 12, dtype=torch.bool)
    padding[0, 5:] = True
    for advance in (1, 3):
        scores = _scores(3, 4, 6, 12, padding)
        weights, _ = Alignment(AlignmentConfig("forward", max_advance=advance), 8)(
            scores, padding, None
        )
        positions = torch.arange(12)
        for t in range(6):
            reachable = (positions <= (t + 1) * advance)[None, None, :] & ~padding[:, None, :]
            assert bool((weights[:, :, t][~reachable.expand_as(weights[:, :, t])] == 0).all())
            assert bool((weights[:, :, t][reachable.expand_as(weights[:, :, t])] > 0).all())
        torch.testing.assert_close(weights.sum(-1), torch.ones(3, 4, 6, dtype=torch.float64))


def test_forward_attention_expected_position_may_move_back() -> None:
    """What the recurrence does *not* guarantee: the expected position is not monotonic.
    α̂ = [½, ½, 0] and a content attention y ≈ [0.99, 0.01, 0] give
    α̂'(0) ∝ ½·0.99 and α̂'(1) ∝ (½ + ½)·0.01: the mean falls from 0.5 to ≈ 0.02. The
    monotonic object is the path (each path only moves right), not the mean."""
    alignment = Alignment(AlignmentConfig("forward"), 8)
    previous = torch.tensor([[[0.5, 0.5, 0.0]]], dtype=torch.float64)
    scores = torch.log(torch.tensor([[[0.99, 0.01, 1e-300]]], dtype=torch.float64))
    after = alignment.step(scores, previous)
    positions = torch.arange(3, dtype=torch.float64)
    assert float((after * positions).sum()) < 0.05 < float((previous * positions).sum())


def test_zero_location_filters_give_content_attention_exactly() -> None:
    padding = torch.zeros(2, 7, dtype=torch.bool)
    padding[0, 4:] = True
    scores = _scores(2, 3, 5, 7, padding)
    alignment = Alignment(AlignmentConfig("location", filters=4, width=3), 6).double()
    moved, _ = alignment(scores, padding, None)
    assert not torch.allclose(moved, torch.softmax(scores, dim=-1))  # the term is live …
    torch.nn.init.zeros_(alignment.location.conv.weight)  # … and F = 0 removes it
    weights, _ = alignment(scores, padding, None)
    assert torch.equal(weights, torch.softmax(scores, dim=-1))


def test_location_term_reads_the_previous_alignment_by_convolution() -> None:
    """e_{t,j} += wᵀ tanh(U (F * α_{t-1})_j), written out with an explicit sum over the
    filter taps, from α_{-1} uniform over the real positions."""
    padding = torch.zeros(1, 6, dtype=torch.bool)
    padding[0, 5:] = True
    scores = _scores(1, 1, 3, 6, padding)
    alignment = Alignment(AlignmentConfig("location", filters=2, width=3), 4).double()
    weights, _ = alignment(scores, padding, None)
    conv = alignment.location.conv.weight[:, 0]  # (k, r)
    previous = torch.tensor([0.2] * 5 + [0.0], dtype=torch.float64)
    for t in range(3):
        padded = torch.nn.functional.pad(previous, (1, 1))
        taps = [
            [sum(conv[f, i] * padded[j + i] for i in range(3)) for f in range(2)] for j in range(6)
        ]
        features = torch.stack([torch.stack(row) for row in taps])  # (S, k)
        term = alignment.location.w(torch.tanh(alignment.location.proj(features))).squeeze(-1)
        previous = torch.softmax(scores[0, 0, t] + term, dim=-1)
        torch.testing.assert_close(weights[0, 0, t], previous)
