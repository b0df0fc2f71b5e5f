"""Each speech task trains a few steps from the command line and evaluates.

The espeak-ng recipes are swapped for small versions of themselves (same builder, 12
voices, a few utterances each), so the tests take seconds; they skip where espeak-ng
cannot be fetched (no apt-get, no Debian mirror).
"""

from __future__ import annotations

import dataclasses
import shutil
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pytest
import soundfile

from selfattn.data.recipes import RECIPES
from selfattn.data.recipes.espeak import ACCENTS, ESPEAK_SOURCE, Espeak
from selfattn.data.recipes.speech import SpokenSpec, spoken_builder
from selfattn.datatypes import DataError

from ..helpers_cli import QUICK_TRAIN, TINY_MODEL, train_and_eval, write_config

#: Sequence tasks pool their vectors; a seq2seq config that set ``pooling`` would be
#: refused (a field its task ignores), so only sequence-task configs carry it.
POOLING = {"pooling": "attention"}


def _config(
    tmp_path: Path,
    data: Mapping[str, object],
    *,
    architecture: str = "transformer",
    epochs: int = 1,
) -> Path:
    model = {"architecture": architecture, **TINY_MODEL, "embed_dim": 32, "ffn_dim": 64}
    pooling = {} if "digit-strings" in str(data["dataset"]) else POOLING
    return write_config(
        tmp_path / "run.toml",
        run_dir=tmp_path / "run",
        data={**data, "batch_size": 8},
        model={**model, "positional": "sinusoidal", **pooling},
        train={**QUICK_TRAIN, "epochs": epochs},
    )


def _small(name: str, spec: SpokenSpec, monkeypatch: pytest.MonkeyPatch) -> None:
    """Swap recipe ``name`` for 1 accent × 12 variants of ``spec`` (skip without espeak-ng)."""
    if not ESPEAK_SOURCE.is_fetched() and not shutil.which("apt-get"):
        pytest.skip("needs apt-get (Debian / Ubuntu) to fetch espeak-ng")
    try:
        Espeak.fetch()
    except DataError as err:
        pytest.skip(f"espeak-ng cannot be fetched or run here ({err})")
    small = dataclasses.replace(spec, accents=ACCENTS[:1])
    monkeypatch.setitem(
        RECIPES, name, dataclasses.replace(RECIPES[name], build=spoken_builder(small))
    )


@pytest.mark.parametrize("architecture", ["transformer", "conformer"])
def test_digits_espeak_trains(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    architecture: str,
) -> None:
    _small("digits-espeak", SpokenSpec(per_voice=5), monkeypatch)
    config = _config(tmp_path, {"dataset": "digits-espeak"}, architecture=architecture)
    metrics = train_and_eval(config, capsys)
    assert metrics["count"] == 10 and 0.0 <= metrics["accuracy"] <= 1.0  # 2 test voices × 5


def test_digit_strings_espeak_trains_and_scores_digit_errors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _small("digit-strings-espeak", SpokenSpec(per_voice=4, digits=(3, 5)), monkeypatch)
    config = _config(tmp_path, {"dataset": "digit-strings-espeak", "max_len": 128}, epochs=2)
    metrics = train_and_eval(config, capsys)
    assert metrics["count"] == 8 and 0.0 <= metrics["exact_match"] <= 1.0
    assert metrics["token_error_rate"] >= 0.0


def test_wav_folder_trains(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "wavs"
    folder.mkdir()
    rng = np.random.default_rng(0)
    rows = []
    for i in range(16):
        label, freq = ("low", 300.0) if i % 2 else ("high", 2_000.0)
        t = np.arange(8_000) / 16_000
        tone = 0.3 * np.sin(2 * np.pi * freq * t) + 0.01 * rng.standard_normal(8_000)
        soundfile.write(folder / f"{i}.wav", tone.astype(np.float32), 16_000)
        rows.append(f"{i}.wav,{label}")
    (folder / "labels.csv").write_text("path,label\n" + "\n".join(rows) + "\n", encoding="utf-8")
    data = {"dataset": folder, "dev": folder, "test": folder / "labels.csv"}
    metrics = train_and_eval(_config(tmp_path, data, epochs=3), capsys)
    assert metrics["count"] == 16 and metrics["accuracy"] >= 0.5


def test_speaker_jv_trains_with_the_conformer(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    try:
        RECIPES["speaker-jv"].fetch()
    except DataError as err:
        pytest.skip(f"speaker-jv cannot be fetched here ({err})")
    data = {"dataset": "speaker-jv", "train_fraction": 0.2}
    metrics = train_and_eval(_config(tmp_path, data, architecture="conformer"), capsys)
    assert metrics["count"] == 370
