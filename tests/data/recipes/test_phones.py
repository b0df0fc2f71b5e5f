"""``phones-espeak``: espeak-ng's phoneme timing as frame labels, split by voice.

A dozen utterances (one accent × the 12 voice variants, one phrase each) from the real
builder; skipped where espeak-ng or the WSJ text cannot be fetched.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from selfattn.data.recipes import RECIPES, Recipe
from selfattn.data.recipes.espeak import ACCENTS
from selfattn.data.recipes.espeak_phonemes import EspeakPhonemes
from selfattn.data.recipes.phones import (
    PHONE_SOURCE,
    PHONES,
    PhoneSpec,
    featurise,
    phone_of,
    phones_builder,
    phrases,
    plan,
    render,
)
from selfattn.datatypes import DataError
from selfattn.speech.alignment import SILENCE
from selfattn.speech.features import SAMPLE_RATE

SMALL = PhoneSpec(per_voice=1, accents=ACCENTS[:1])


@pytest.fixture
def paths(fetched: Callable[[str], Recipe]) -> list[Path]:
    fetched("phones-espeak")  # skips, naming why, only where espeak-ng cannot be fetched
    return PHONE_SOURCE.fetch()


def test_phrases_are_short_runs_of_words() -> None:
    line = (
        "Pierre/NNP Vinken/NNP ,/, 61/CD years/NNS old/JJ ,/, does/VBZ n't/RB join/VB "
        "the/DT board/NN ./."
    )
    assert phrases([line], max_words=3) == ["Pierre Vinken", "years old", "doesn't join the"]


def test_every_mnemonic_maps_into_the_phone_set() -> None:
    assert phone_of("I2") == "I" and phone_of("_:") == SILENCE and phone_of("dZ") == "dZ"
    with pytest.raises(DataError, match="PHONE_MAP"):
        phone_of("Q!")


def test_phone_timing_is_monotone_covers_the_audio_and_is_plausible(paths: list[Path]) -> None:
    speaker = EspeakPhonemes.load(paths[:-1])
    durations = []
    for utterance in plan(SMALL, (["the board will meet"],) * 3)[:4]:
        samples, segments = render(speaker, utterance)
        starts = [start for start, _ in segments]
        assert starts == sorted(starts)
        before = SAMPLE_RATE * utterance.pad[0] // 1000
        assert before <= starts[0] and starts[-1] <= len(samples)
        assert segments[-1][1] == SILENCE  # the padding after
        spoken = [(b - a, p) for (a, p), (b, _) in itertools.pairwise(segments)]
        durations += [1000 * n / SAMPLE_RATE for n, phone in spoken if phone != SILENCE]
        vectors, labels = featurise(samples, segments)
        assert len(labels) == len(vectors) and vectors.shape[1] == 40
        assert labels[0] == labels[-1] == SILENCE and set(labels) <= set(PHONES)
        assert len(set(labels)) >= 8  # "the board will meet": D @ b O@ d w I l m i: t
    assert 30 < float(np.median(durations)) < 150  # ms a phone


def test_split_by_voice_and_a_label_per_frame(paths: list[Path]) -> None:
    splits = phones_builder(SMALL)(RECIPES["phones-espeak"], paths)
    voices = [
        {e.source.split("/")[1] for e in part} for part in (splits.train, splits.dev, splits.test)
    ]
    assert [len(v) for v in voices] == [8, 2, 2]
    assert not (voices[0] & voices[1] or voices[0] & voices[2] or voices[1] & voices[2])
    assert {v.split("+")[1] for v in voices[2]} == {"m3", "f2"}
    for example in splits.train + splits.dev + splits.test:
        assert example.features is not None
        assert len(example.label) == len(example.features)
        assert example.label[0] == example.label[-1] == SILENCE
