"""Phone timing → frame labels, and the phone error rate of frame labels."""

from __future__ import annotations

import numpy as np
import pytest

from selfattn.speech.alignment import (
    SILENCE,
    collapse,
    edit_distance,
    error_rate,
    frame_labels,
    phone_error_rate,
)
from selfattn.speech.features import SAMPLE_RATE, log_mel, num_frames


@pytest.mark.parametrize("num_samples", [0, 399, 400, 559, 560, 16_000, 23_457])
def test_one_label_per_log_mel_frame(num_samples: int) -> None:
    segments = [(1000, "a"), (3000, "b")]
    labels = frame_labels(segments, num_samples, SAMPLE_RATE)
    frames = log_mel(np.zeros(num_samples, dtype=np.float32), SAMPLE_RATE, n_mels=8).shape[0]
    assert len(labels) == frames == num_frames(num_samples, SAMPLE_RATE)


def test_each_frame_gets_the_phone_at_its_centre() -> None:
    rng = np.random.default_rng(0)
    starts = np.sort(rng.integers(0, 20_000, size=12))
    segments = [(int(s), f"p{i}") for i, s in enumerate(starts)]
    labels = frame_labels(segments, 20_000, SAMPLE_RATE)
    for t, label in enumerate(labels):
        centre = t * 160 + 200  # 10 ms hop, 25 ms window at 16 kHz
        begun = [name for start, name in segments if start <= centre]
        assert label == (begun[-1] if begun else SILENCE)
    # monotone: the segment index never goes back, silence only before the first phone
    order = [-1 if x == SILENCE else int(x[1:]) for x in labels]
    assert order == sorted(order)


def test_segments_out_of_order_are_refused() -> None:
    with pytest.raises(ValueError, match="time order"):
        frame_labels([(500, "a"), (100, "b")], 4000, SAMPLE_RATE)


def test_phone_error_rate_counts_edits_of_collapsed_strings() -> None:
    truth = ["sil", "a", "a", "b", "b", "sil", "c"]
    assert collapse(truth) == ["a", "b", "c"]
    assert phone_error_rate([truth], [truth]) == 0.0
    # one substitution (b→d) over 3 reference phones; frame durations do not matter
    assert phone_error_rate([["a", "d", "d", "d", "c"]], [truth]) == pytest.approx(1 / 3)
    assert edit_distance(list("kitten"), list("sitting")) == 3


def test_error_rate_sums_edits_and_reference_lengths_over_the_corpus() -> None:
    # (1 + 0) edits over (2 + 4) reference units: not the mean of 1/2 and 0/4
    assert error_rate(["a b", "c d e f"], ["a x", "c d e f"], str.split) == pytest.approx(1 / 6)
    assert error_rate([], [], str.split) == 0.0
    with pytest.raises(ValueError):
        error_rate(["a"], [], str.split)  # pairs, strictly
