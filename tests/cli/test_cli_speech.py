"""Each speech task trains a few steps from the command line and evaluates.

The espeak-ng recipes are swapped for small versions of themselves (same builder, 12
voices, a few utterances each), so the tests take seconds; they skip where espeak-ng
cannot be fetched (no apt-get, no Debian mirror).
"""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import soundfile

from selfattn.cli.main import main
from selfattn.data.recipes import RECIPES
from selfattn.data.recipes.espeak import ACCENTS, ESPEAK_SOURCE, Espeak
from selfattn.data.recipes.speech import SpokenSpec, spoken_builder
from selfattn.data.types import DataError

MODEL = """
[model]
architecture = "{architecture}"
embed_dim = 32
num_heads = 2
num_layers = 1
ffn_dim = 64
dropout = 0.0
positional = "sinusoidal"
"""
#: Sequence tasks pool their vectors; a seq2seq config that set this would be refused
#: (a field its task ignores), so only sequence-task configs carry it.
POOLING = 'pooling = "attention"\n'

TRAIN = """
[train]
epochs = {epochs}
lr = 3e-3
warmup_steps = 2
seed = 0
threads = 1
device = "cpu"
"""


def _config(
    tmp_path: Path, data: str, *, architecture: str = "transformer", epochs: int = 1
) -> Path:
    path = tmp_path / "run.toml"
    text = f'run_dir = "{tmp_path / "run"}"\n\n[data]\n{data}\nbatch_size = 8\n'
    model = MODEL.format(architecture=architecture)
    if "digit-strings" not in data:
        model += POOLING
    path.write_text(text + model + TRAIN.format(epochs=epochs), encoding="utf-8")
    return path


def _train_and_eval(config: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, float]:
    assert main(["train", str(config), "--no-progress"]) == 0
    capsys.readouterr()
    assert main(["eval", str(config.parent / "run"), "--split", "test"]) == 0
    metrics: dict[str, float] = json.loads(capsys.readouterr().out)
    return metrics


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
    config = _config(tmp_path, 'dataset = "digits-espeak"', architecture=architecture)
    metrics = _train_and_eval(config, capsys)
    assert metrics["count"] == 10 and 0.0 <= metrics["accuracy"] <= 1.0  # 2 test voices × 5


def test_digit_strings_espeak_trains_and_scores_digit_errors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _small("digit-strings-espeak", SpokenSpec(per_voice=4, digits=(3, 5)), monkeypatch)
    config = _config(tmp_path, 'dataset = "digit-strings-espeak"\nmax_len = 128', epochs=2)
    metrics = _train_and_eval(config, capsys)
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
    data = f'dataset = "{folder}"\ndev = "{folder}"\ntest = "{folder / "labels.csv"}"'
    metrics = _train_and_eval(_config(tmp_path, data, epochs=3), capsys)
    assert metrics["count"] == 16 and metrics["accuracy"] >= 0.5


def test_speaker_jv_trains_with_the_conformer(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    try:
        RECIPES["speaker-jv"].fetch()
    except DataError as err:
        pytest.skip(f"speaker-jv cannot be fetched here ({err})")
    data = 'dataset = "speaker-jv"\ntrain_fraction = 0.2'
    metrics = _train_and_eval(_config(tmp_path, data, architecture="conformer"), capsys)
    assert metrics["count"] == 370
