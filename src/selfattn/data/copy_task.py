"""The neural Turing machine's copy and repeat-copy tasks (Graves et al. 2014, §4.1–4.2).

Copy: a sequence of random ``bits``-wide binary vectors, then a delimiter; the machine must
then write the sequence back with no input. Repeat copy: the same, followed by the number
of repeats, and the sequence is to be written that many times, then an end marker.

Inputs are ``(T, bits + 2)``: the bits, a delimiter channel and (repeat copy) a channel
holding the repeat count, normalised. Targets are ``(T, bits + 1)`` (the last channel is
repeat copy's end marker), with a mask that is 1 only where an output is due; the score is
the number of wrong bits per sequence, outputs thresholded at 0.5 (the paper's cost).

The layout is data: the ``copy`` and ``repeat-copy`` recipes draw their examples with
:func:`copy_batch`, and the ``bits`` task reads a user's sequence with :func:`copy_inputs`.
It lives in the data package so that the recipes need nothing of the models' packages.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

__all__ = ["CopyBatch", "bits_wrong", "copy_batch", "copy_inputs", "copy_loss"]


@dataclass
class CopyBatch:
    """Copy-task sequences, padded to one length.

    Attributes:
        inputs: ``(B, T, bits + 2)``.
        targets: ``(B, T, bits + 1)``.
        mask: ``(B, T)`` 1 where the machine must write.
    """

    inputs: Tensor
    targets: Tensor
    mask: Tensor


def copy_batch(
    batch: int,
    length: int,
    *,
    bits: int = 8,
    repeats: int = 0,
    max_repeats: int = 10,
    generator: torch.Generator | None = None,
) -> CopyBatch:
    """``batch`` sequences of ``length`` random vectors: copy (``repeats`` 0) or repeat
    copy (the sequence to be written ``repeats`` times, the count given after the
    delimiter as ``repeats / max_repeats``: training draws up to ``max_repeats``, and a
    test of generalisation asks for more, a count above 1).

    Raises:
        ValueError: ``length`` < 1, ``repeats`` < 0 or ``max_repeats`` < 1.
    """
    if length < 1:
        raise ValueError(f"copy sequences need length ≥ 1, got {length}")
    if repeats < 0 or max_repeats < 1:
        raise ValueError(
            f"repeats must be ≥ 0 and max_repeats ≥ 1, got {repeats} and {max_repeats}"
        )
    sequence = torch.randint(0, 2, (batch, length, bits), generator=generator).float()
    return copy_inputs(sequence, repeats=repeats, max_repeats=max_repeats)


def copy_inputs(sequence: Tensor, *, repeats: int = 0, max_repeats: int = 10) -> CopyBatch:
    """The copy (``repeats`` 0) or repeat-copy batch of given ``(B, L, bits)`` sequences of
    0 / 1 vectors: what :func:`copy_batch` makes of random ones."""
    batch, length, bits = sequence.shape
    written = sequence.repeat(1, max(repeats, 1), 1)  # what the machine writes
    read = length + 1 + (1 if repeats else 0)  # the sequence, the delimiter, the count
    total = read + written.shape[1] + (1 if repeats else 0)  # + end marker
    inputs = torch.zeros(batch, total, bits + 2)
    targets = torch.zeros(batch, total, bits + 1)
    mask = torch.zeros(batch, total)
    inputs[:, :length, :bits] = sequence
    inputs[:, length, bits] = 1.0  # the delimiter
    if repeats:
        inputs[:, length + 1, bits + 1] = repeats / max_repeats
    targets[:, read : read + written.shape[1], :bits] = written
    mask[:, read : read + written.shape[1]] = 1.0
    if repeats:
        targets[:, -1, bits] = 1.0  # the end marker
        mask[:, -1] = 1.0
    return CopyBatch(inputs, targets, mask)


def bits_wrong(logits: Tensor, batch: CopyBatch) -> Tensor:
    """``(B,)`` wrong bits per sequence where an output is due (outputs above 0.5 are 1)."""
    wrong = ((logits > 0).float() != batch.targets).float() * batch.mask.unsqueeze(-1)
    return wrong.sum((1, 2))


def copy_loss(logits: Tensor, batch: CopyBatch) -> Tensor:
    """Binary cross-entropy per due output bit, averaged."""
    loss = torch.nn.functional.binary_cross_entropy_with_logits(
        logits, batch.targets, reduction="none"
    )
    due = batch.mask.unsqueeze(-1).expand_as(loss)
    return (loss * due).sum() / due.sum()
