"""Neural Turing machine addressing, reading and writing."""

from __future__ import annotations

import pytest
import torch

from selfattn.memory.ntm import (
    NTM,
    address,
    content_weights,
    read,
    sharpen,
    shift_weights,
    write,
)


def test_a_shift_of_plus_one_moves_a_one_hot_weighting_by_one_slot() -> None:
    weights = torch.zeros(2, 5)
    weights[0, 1] = weights[1, 4] = 1.0
    plus_one = torch.tensor([[0.0, 0.0, 1.0]] * 2)  # shifts −1, 0, +1
    moved = shift_weights(weights, plus_one)
    assert moved[0].tolist() == [0, 0, 1, 0, 0]
    assert moved[1].tolist() == [1, 0, 0, 0, 0]  # wraps around
    minus_one = torch.tensor([[1.0, 0.0, 0.0]] * 2)
    assert shift_weights(weights, minus_one)[0].tolist() == [1, 0, 0, 0, 0]


def test_addressing_weights_are_normalised_and_content_finds_the_key() -> None:
    torch.manual_seed(0)
    memory = torch.randn(3, 8, 6)
    key = memory[:, 5] * 2.0  # the same direction as slot 5
    content = content_weights(memory, key, torch.full((3,), 50.0))
    assert (content.argmax(-1) == 5).all()
    weights = address(
        memory,
        torch.softmax(torch.randn(3, 8), -1),
        torch.randn(3, 6),
        torch.rand(3) * 5,
        torch.rand(3),
        torch.softmax(torch.randn(3, 3), -1),
        1 + torch.rand(3) * 3,
    )
    torch.testing.assert_close(weights.sum(-1), torch.ones(3))
    assert (weights >= 0).all()


def test_gate_zero_keeps_the_previous_focus_and_sharpening_sharpens() -> None:
    memory, previous = torch.randn(1, 4, 3), torch.tensor([[0.1, 0.6, 0.2, 0.1]])
    stay = torch.tensor([[0.0, 1.0, 0.0]])
    kept = address(
        memory, previous, torch.randn(1, 3), torch.ones(1), torch.zeros(1), stay, torch.ones(1)
    )
    torch.testing.assert_close(kept, previous)
    sharper = sharpen(previous, torch.tensor([3.0]))
    assert sharper[0, 1] > previous[0, 1] and float(sharper.sum()) == pytest.approx(1.0)


def test_write_erases_then_adds_where_the_weights_point_and_read_reads_it() -> None:
    memory = torch.ones(1, 3, 2)
    focus = torch.tensor([[0.0, 1.0, 0.0]])
    written = write(memory, focus, torch.ones(1, 2), torch.tensor([[5.0, 7.0]]))
    assert written[0].tolist() == [[1, 1], [5, 7], [1, 1]]
    assert read(written, focus)[0].tolist() == [5, 7]
    half = write(memory, focus * 0.5, torch.ones(1, 2), torch.zeros(1, 2))
    assert half[0, 1].tolist() == [0.5, 0.5]


def test_the_machine_runs_a_sequence_and_learns_gradients() -> None:
    torch.manual_seed(0)
    ntm = NTM(5, 4, hidden=16, slots=10, width=6)
    out, looks = ntm(torch.randn(2, 7, 5))
    assert out.shape == (2, 7, 4) and len(looks) == 7
    for weights in looks:
        torch.testing.assert_close(weights.sum(-1), torch.ones(2))
    out.sum().backward()
    assert ntm.initial_memory.grad is not None and ntm.write_head.proj.weight.grad is not None
