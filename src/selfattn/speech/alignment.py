"""Phone timing to frame labels, and back to phone strings (lecture 000 §"Vector set as
input": one vector per 10 ms frame; the course's HW2, frame-level phone classification).

A phone segmentation is a list of ``(first sample, phone)`` in time order: each phone
lasts until the next one starts, the last until the end of the audio, and the audio
before the first is silence. Frame t of :func:`~selfattn.speech.features.log_mel` covers
samples ``[t·hop, t·hop + W)``; its label is the phone sounding at the window's centre,
sample ``t·hop + W/2`` (Kaldi's convention for frame alignments). So every frame has
exactly one label and there are exactly :func:`~selfattn.speech.features.num_frames` of
them.

The phone error rate of a frame labelling (:func:`phone_error_rate`) compares phone
strings, not frames: runs of equal frame labels collapse to one phone, silence is dropped
(Lee & Hon 1989, TIMIT's convention), and the Levenshtein distance to the reference string
is divided by the reference's length.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from itertools import groupby
from typing import TypeVar

import numpy as np

from selfattn.speech.features import frame_sizes, num_frames

__all__ = [
    "SILENCE",
    "collapse",
    "edit_distance",
    "error_rate",
    "frame_labels",
    "phone_error_rate",
]

_T = TypeVar("_T")

#: The label of frames before the first phone, of pauses and of added padding.
SILENCE = "sil"


def frame_labels(
    segments: Sequence[tuple[int, str]], num_samples: int, sample_rate: int
) -> tuple[str, ...]:
    """One label per 25 ms / 10 ms frame of ``num_samples`` samples.

    Args:
        segments: ``(first sample, phone)`` pairs with non-decreasing first samples.
        num_samples: the audio's length in samples.
        sample_rate: Hz (the frame's window and hop in samples depend on it).

    Returns:
        ``num_frames(num_samples, sample_rate)`` labels: the phone sounding at each
        frame's centre, :data:`SILENCE` before the first phone.

    Raises:
        ValueError: the segments' first samples decrease.
    """
    starts = np.array([start for start, _ in segments], dtype=np.int64)
    if np.any(np.diff(starts) < 0):
        raise ValueError("phone segments must be in time order")
    window, hop = frame_sizes(sample_rate)
    centres = np.arange(num_frames(num_samples, sample_rate)) * hop + window // 2
    # index of the last segment starting at or before each centre (-1: before the first)
    which = np.searchsorted(starts, centres, side="right") - 1
    names = [SILENCE] + [phone for _, phone in segments]
    return tuple(names[i + 1] for i in which)


def collapse(labels: Sequence[str], *, silence: str = SILENCE) -> list[str]:
    """Frame labels as a phone string: runs merged to one phone, silence dropped."""
    return [label for label, _ in groupby(labels) if label != silence]


def edit_distance(hypothesis: Sequence[str], reference: Sequence[str]) -> int:
    """Levenshtein distance: substitutions + deletions + insertions, each costing 1."""
    previous = list(range(len(reference) + 1))
    for i, word in enumerate(hypothesis, start=1):
        current = [i]
        for j, target in enumerate(reference, start=1):
            current.append(
                min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (word != target))
            )
        previous = current
    return previous[-1]


def error_rate(
    hypotheses: Sequence[_T], references: Sequence[_T], units: Callable[[_T], Sequence[str]]
) -> float:
    """Σ edit distance / Σ reference units over pairs, each side cut into ``units`` first
    (phones, words): the error rate of a whole corpus, not a mean of per-pair rates."""
    errors = total = 0
    for hypothesis, reference in zip(hypotheses, references, strict=True):
        target = units(reference)
        errors += edit_distance(units(hypothesis), target)
        total += len(target)
    return errors / max(total, 1)


def phone_error_rate(
    predicted: Sequence[Sequence[str]], reference: Sequence[Sequence[str]]
) -> float:
    """Σ edit distance / Σ reference phones over utterances of frame labels (each
    :func:`collapse`-d first)."""
    return error_rate(predicted, reference, collapse)
