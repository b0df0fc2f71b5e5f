"""The copy and repeat-copy tasks: what is read, what must be written, and the score."""

from __future__ import annotations

import pytest
import torch

from selfattn.data.copy_task import bits_wrong, copy_batch, copy_loss


def test_copy_asks_for_the_sequence_after_the_delimiter() -> None:
    batch = copy_batch(3, 5, bits=4, generator=torch.Generator().manual_seed(0))
    assert batch.inputs.shape == (3, 11, 6) and batch.targets.shape == (3, 11, 5)
    assert (batch.inputs[:, 5, 4] == 1).all() and batch.inputs[:, 6:].abs().sum() == 0
    torch.testing.assert_close(batch.targets[:, 6:, :4], batch.inputs[:, :5, :4])
    assert batch.mask[:, :6].sum() == 0 and (batch.mask[:, 6:] == 1).all()


def test_repeat_copy_writes_the_sequence_n_times_then_the_end_marker() -> None:
    batch = copy_batch(2, 3, bits=4, repeats=2, generator=torch.Generator().manual_seed(1))
    sequence = batch.inputs[:, :3, :4]
    assert batch.inputs[0, 4, 5] == pytest.approx(0.2)  # 2 repeats of at most 10
    written = batch.targets[:, 5:11, :4]
    torch.testing.assert_close(written, torch.cat([sequence, sequence], dim=1))
    assert (batch.targets[:, -1, 4] == 1).all() and (batch.mask[:, -1] == 1).all()


def test_bits_wrong_counts_only_due_outputs() -> None:
    batch = copy_batch(2, 4, bits=3, generator=torch.Generator().manual_seed(2))
    perfect = batch.targets * 20 - 10  # logits of the right sign
    assert bits_wrong(perfect, batch).tolist() == [0.0, 0.0]
    flipped = perfect.clone()
    flipped[0, 6, :2] *= -1  # two bits wrong where an output is due
    flipped[1, 0, :] *= -1  # bits before the delimiter are not scored
    assert bits_wrong(flipped, batch).tolist() == [2.0, 0.0]
    assert copy_loss(perfect, batch) < 1e-3 < copy_loss(flipped, batch)


def test_refusals() -> None:
    with pytest.raises(ValueError, match="length ≥ 1"):
        copy_batch(1, 0)
    with pytest.raises(ValueError, match="repeats must be ≥ 0"):
        copy_batch(1, 2, repeats=-1)
    with pytest.raises(ValueError, match="max_repeats ≥ 1"):
        copy_batch(1, 2, repeats=2, max_repeats=0)
    # More repeats than training's most: the count channel goes above 1.
    assert float(copy_batch(1, 2, repeats=15).inputs[0, 3, 9]) == 1.5
