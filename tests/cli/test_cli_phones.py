"""Frame-level phones from the command line: ``phones-espeak`` and a user's ``path,phones``
CSV train, evaluate and predict; each bad input is one line naming its file and line,
exit status 2.

The recipe is swapped for a dozen of its utterances (same builder); the user's files are
written here: tone, noise and silence, labelled per frame from where they were put.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import soundfile

from selfattn.cli.main import main
from selfattn.data.recipes import RECIPES, Recipe
from selfattn.data.recipes.espeak import ACCENTS
from selfattn.data.recipes.phones import PhoneSpec, phones_builder
from selfattn.speech.alignment import frame_labels
from selfattn.speech.features import SAMPLE_RATE, num_frames

from ..helpers_cli import QUICK_TRAIN, TINY_MODEL, one_line_error, train_and_eval, write_config

#: A one-layer Transformer of width 32 whose frames attend within a window.
MODEL = {"architecture": "transformer", **TINY_MODEL, "embed_dim": 32, "ffn_dim": 64}
WINDOW = {"attention": "window", "attention_size": 4}


def _config(tmp_path: Path, dataset: str, epochs: int = 1, test: Path | None = None) -> Path:
    return write_config(
        tmp_path / "run.toml",
        run_dir=tmp_path / "run",
        data={"dataset": dataset, "batch_size": 4, "max_len": 400, "test": test},
        model={**MODEL, **WINDOW},
        train={**QUICK_TRAIN, "epochs": epochs},
    )


def _recording(folder: Path, name: str, seed: int) -> int:
    """``name.wav``, 0.4-0.6 s of silence, a 300 Hz tone and noise in a random order, and
    ``name.phn``, its frame labels; returns the frame count."""
    rng = np.random.default_rng(seed)
    parts, segments, start = [], [], 0
    for label in rng.permutation(["sil", "a", "s"]):
        n = int(rng.integers(2000, 3200))
        t = np.arange(n) / SAMPLE_RATE
        wave = {"sil": 0 * t, "a": 0.5 * np.sin(2 * np.pi * 300 * t), "s": rng.normal(0, 0.3, n)}
        parts.append(wave[label] + rng.normal(0, 1e-3, n))
        segments.append((start, str(label)))
        start += n
    samples = np.concatenate(parts).astype(np.float32)
    soundfile.write(folder / f"{name}.wav", samples, SAMPLE_RATE)
    labels = frame_labels(segments, len(samples), SAMPLE_RATE)
    (folder / f"{name}.phn").write_text("\n".join(labels) + "\n", encoding="utf-8")
    return len(labels)


def _manifest(folder: Path, names: list[str]) -> Path:
    path = folder / "phones.csv"
    path.write_text("path,phones\n" + "".join(f"{n}.wav,{n}.phn\n" for n in names))
    return path


def test_user_phone_files_train_evaluate_and_predict_a_label_per_frame(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    frames = [_recording(tmp_path, f"u{i}", seed=i) for i in range(8)]
    _manifest(tmp_path, [f"u{i}" for i in range(8)])
    metrics = train_and_eval(_config(tmp_path, str(tmp_path), epochs=12, test=tmp_path), capsys)
    assert metrics["count"] == sum(frames)  # every frame of every recording scored once
    assert metrics["accuracy"] > 0.6  # tone, noise and silence are easy to tell apart
    assert main(["predict", str(tmp_path / "run"), str(tmp_path / "u0.wav")]) == 0
    tags = capsys.readouterr().out.split()
    assert len(tags) == frames[0] and {t.rpartition("/")[2] for t in tags} <= {"sil", "a", "s"}


def _bad(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> str:
    return one_line_error(capsys, ["train", str(_config(tmp_path, str(tmp_path / "phones.csv")))])


def test_audio_shorter_than_one_frame_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _recording(tmp_path, "ok", seed=0)
    soundfile.write(tmp_path / "short.wav", np.zeros(300, np.float32), SAMPLE_RATE)
    (tmp_path / "short.phn").write_text("sil\n")
    _manifest(tmp_path, ["ok", "short"])
    err = _bad(tmp_path, capsys)
    assert "phones.csv:3" in err and "short.wav is too short" in err and "25 ms" in err


def test_label_count_that_disagrees_with_the_frames_names_both_counts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    frames = _recording(tmp_path, "u0", seed=0)
    phn = tmp_path / "u0.phn"
    phn.write_text("\n".join(phn.read_text().splitlines()[:-1]) + "\n")  # one label short
    _manifest(tmp_path, ["u0"])
    err = _bad(tmp_path, capsys)
    assert "phones.csv:2" in err and "u0.phn" in err
    assert f"{frames - 1} phone labels" in err and f"{frames} frames" in err


@pytest.mark.parametrize(
    ("problem", "expected"),
    [
        ("missing", "phones.csv:2: no such audio file"),
        ("no-labels-file", "phones.csv:2: no such phone-label file"),
        ("empty", "u0.phn: no phone labels"),
        ("blank-line", "u0.phn:2: empty phone label"),
    ],
)
def test_missing_files_and_empty_labels_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], problem: str, expected: str
) -> None:
    _recording(tmp_path, "u0", seed=0)
    phn = tmp_path / "u0.phn"
    if problem == "missing":
        (tmp_path / "u0.wav").unlink()
    elif problem == "no-labels-file":
        phn.unlink()
    elif problem == "empty":
        phn.write_text("\n")
    else:
        phn.write_text("sil\n\nsil\n")
    _manifest(tmp_path, ["u0"])
    assert expected in _bad(tmp_path, capsys)


def test_recipe_trains_and_scores_every_test_frame(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    fetched: Callable[[str], Recipe],
) -> None:
    fetched("phones-espeak")
    small = PhoneSpec(per_voice=1, accents=ACCENTS[:1])
    recipe = dataclasses.replace(RECIPES["phones-espeak"], build=phones_builder(small))
    monkeypatch.setitem(RECIPES, "phones-espeak", recipe)
    metrics = train_and_eval(_config(tmp_path, "phones-espeak"), capsys)
    test = recipe.load().test
    assert len(test) == 2  # the test voices m3 and f2 of one accent
    assert metrics["count"] == sum(len(e.label) for e in test)  # a label per frame
    # a user's recording is read as the recipe's frames: one vector, one label, per 10 ms
    soundfile.write(tmp_path / "any.wav", np.random.default_rng(0).normal(0, 0.1, 8000), 16_000)
    assert main(["predict", str(tmp_path / "run"), str(tmp_path / "any.wav")]) == 0
    assert len(capsys.readouterr().out.split()) == num_frames(8000, SAMPLE_RATE) == 48
