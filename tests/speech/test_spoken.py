"""Spoken digits from espeak-ng, the speech front end, and a user's folder of WAV files."""

from __future__ import annotations

import dataclasses
import shutil
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import soundfile

from selfattn.data import load_dataset
from selfattn.data.recipes import RECIPES
from selfattn.data.recipes.espeak import ESPEAK_SOURCE, Espeak
from selfattn.data.recipes.speech import (
    TEST_VARIANTS,
    WORDS,
    SpokenSpec,
    generate,
    plan,
    split_by_voice,
    spoken_builder,
)
from selfattn.datatypes import DataError, Example
from selfattn.speech import N_MELS, SAMPLE_RATE, STACK, num_frames, speech_vectors
from selfattn.tasks import token_error_rate

#: 2 accents × 3 variants (one of each split), 2 utterances a voice: seconds to make.
SMALL = SpokenSpec(per_voice=2, accents=("en", "en-us"), variants=("m1", "m6", "m3"))


def espeak_or_skip() -> Espeak:
    """The fetched espeak-ng, or a skip that says why it cannot be had here."""
    if not ESPEAK_SOURCE.is_fetched() and not shutil.which("apt-get"):
        pytest.skip("needs apt-get (Debian / Ubuntu) to fetch espeak-ng")
    try:
        return Espeak.fetch()
    except DataError as err:
        pytest.skip(f"espeak-ng cannot be fetched or run here ({err})")


def _sine(seconds: float, freq: float = 440.0, rate: int = SAMPLE_RATE) -> np.ndarray:
    t = np.arange(int(seconds * rate)) / rate
    return (0.3 * np.sin(2 * np.pi * freq * t)).astype(np.float32)


# ------------------------------------------------------------------------- front end


def test_speech_vectors_of_one_second() -> None:
    vectors = speech_vectors(_sine(1.0) + 0.01 * np.random.default_rng(0).random(16_000), 16_000)
    frames = num_frames(16_000, SAMPLE_RATE)  # 98 frames of 10 ms
    assert vectors.shape == (frames // STACK, STACK * N_MELS) == (32, 120)
    assert vectors.dtype == np.float32
    first_frames = vectors.reshape(-1, N_MELS)  # back to (96, 40) frames
    assert np.allclose(first_frames.mean(0), 0, atol=0.2)  # normalised per band (CMVN)
    with pytest.raises(ValueError, match="16000 Hz"):
        speech_vectors(_sine(0.5, rate=8_000), 8_000)


# ------------------------------------------------------------------------- the plan


def test_plan_is_seeded_balanced_and_splits_by_voice() -> None:
    words = plan(dataclasses.replace(SMALL, per_voice=20))
    assert words == plan(dataclasses.replace(SMALL, per_voice=20))
    assert Counter(u.label for u in words) == dict.fromkeys(WORDS, 12)  # 6 voices × 2
    other = plan(dataclasses.replace(SMALL, per_voice=20, seed=1))
    assert [u.speed for u in words] != [u.speed for u in other]
    assert all(130 <= u.speed <= 220 and 10 <= u.snr_db <= 30 for u in words)

    strings = plan(dataclasses.replace(SMALL, per_voice=10, digits=(3, 5)))
    assert {len(u.label) for u in strings} == {3, 4, 5}
    assert all(u.text == " ".join(WORDS[int(d)] for d in u.label) for u in strings)

    examples = [Example(None, np.zeros((1, 1)), u.label, u.voice) for u in words]
    train, dev, test = split_by_voice(examples, [u.voice for u in words])
    voices = [{e.source for e in part} for part in (train, dev, test)]
    assert voices == [{"en+m1", "en-us+m1"}, {"en+m6", "en-us+m6"}, {"en+m3", "en-us+m3"}]
    assert all(e.source.split("+")[1] in TEST_VARIANTS for e in test)


# ------------------------------------------------------------------------- espeak-ng


def test_fetched_espeak_speaks_and_generation_is_deterministic() -> None:
    espeak = espeak_or_skip()
    samples, rate = espeak.synthesize("seven", "en-us+f2")
    assert rate == 22_050 and 0.2 < len(samples) / rate < 2.0 and np.abs(samples).max() > 0.05
    first, second = generate(SMALL, espeak), generate(SMALL, espeak)
    assert [u for u, _ in first] == plan(SMALL)
    for (_, a), (_, b) in zip(first, second, strict=True):
        assert a.shape[1] == 120 and 5 <= len(a) <= 80
        np.testing.assert_array_equal(a, b)
    with pytest.raises(DataError, match="no-such-voice"):
        espeak.synthesize("seven", "no-such-voice")


def test_small_recipe_is_cached_and_split_by_voice() -> None:
    espeak_or_skip()
    recipe = dataclasses.replace(RECIPES["digits-espeak"], build=spoken_builder(SMALL))
    splits = recipe.load()
    again = recipe.load()  # from the cached .npz
    assert (splits.task, splits.input) == ("sequence", "vectors")
    assert (len(splits.train), len(splits.dev), len(splits.test)) == (4, 4, 4)
    for a, b in zip(splits.test, again.test, strict=True):
        assert a.source == b.source and a.label == b.label
        np.testing.assert_array_equal(a.features, b.features)
    assert all("+m3/" in e.source for e in splits.test)
    assert "espeak-ng" in splits.extra["source"]


def test_full_recipes_are_registered() -> None:
    digits, strings = RECIPES["digits-espeak"], RECIPES["digit-strings-espeak"]
    assert (digits.task, strings.task) == ("sequence", "seq2seq")
    assert digits.source.origin().startswith("Debian espeak-ng=")
    assert len(plan(SpokenSpec(per_voice=30))) == 2_880


# ------------------------------------------------------------------------- user WAVs


def _wav_folder(folder: Path, rows: list[str]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for i, freq in enumerate((300.0, 600.0, 900.0)):
        soundfile.write(folder / f"tone{i}.wav", _sine(0.5, freq, 22_050), 22_050)
    csv = folder / "labels.csv"
    csv.write_text("path,label\n" + "\n".join(rows) + "\n", encoding="utf-8")
    return csv


def test_wav_folder_loads_as_vectors(tmp_path: Path) -> None:
    csv = _wav_folder(tmp_path / "wavs", ["tone0.wav,low", "tone1.wav,mid", "", "tone2.wav,high"])
    splits = load_dataset(csv)
    assert (splits.task, splits.input) == ("sequence", "vectors")
    assert [e.label for e in splits.train] == ["low", "mid", "high"]
    assert splits.train[0].features is not None and splits.train[0].features.shape == (16, 120)
    assert splits.train[2].source == f"{csv}:5"
    assert [e.label for e in load_dataset(tmp_path / "wavs").train] == ["low", "mid", "high"]
    strings = load_dataset(_wav_folder(tmp_path / "s", ["tone0.wav,3 5 1"]), task="seq2seq")
    assert (strings.task, strings.train[0].label) == ("seq2seq", ("3", "5", "1"))


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        (["tone0.wav,low", "gone.wav,mid"], r"labels.csv:3: no such WAV file .*gone.wav"),
        (["tone0.wav,low,extra"], r"labels.csv:2: expected 2 cells \(path,label\), got 3"),
        (["tone0.wav, "], r"labels.csv:2: empty label"),
        (["labels.csv,x"], r"labels.csv:2: .*labels.csv: not a WAV file"),
    ],
)
def test_wav_folder_errors_name_file_and_line(
    tmp_path: Path, rows: list[str], message: str
) -> None:
    with pytest.raises(DataError, match=message):
        load_dataset(_wav_folder(tmp_path, rows))


def test_label_text_csv_is_still_classification(tmp_path: Path) -> None:
    path = tmp_path / "reviews.csv"
    path.write_text("label,text\npos,a fine film\nneg,dull\n", encoding="utf-8")
    splits = load_dataset(path)
    assert (splits.input, splits.train[0].tokens) == ("text", ("a", "fine", "film"))


# ------------------------------------------------------------------------- scoring


def test_token_error_rate_counts_edits_over_reference_tokens() -> None:
    assert token_error_rate([["3", "5", "1"]], [["3", "5", "1"]]) == 0.0
    assert token_error_rate([["3", "1"]], [["3", "5", "1"]]) == pytest.approx(1 / 3)
    assert token_error_rate([["9", "3", "5"], []], [["3", "5", "1"], ["2"]]) == 3 / 4
