"""train / resume / eval / predict / attention from the command line, on data the test makes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from selfattn.cli.main import main

from ..helpers_cli import QUICK_TRAIN, TINY_MODEL, one_line_error, train_and_resume, write_config
from ..helpers_data import write_tagged


def _config(
    tmp_path: Path, run_dir: Path, *, epochs: int = 2, architecture: str = "transformer"
) -> Path:
    """A 2-layer tagger on 64 tagged sentences (16 more as dev and test)."""
    dev = write_tagged(tmp_path / "dev.txt", 16, 1)
    data = {"dataset": write_tagged(tmp_path / "train.txt", 64, 0), "dev": dev, "test": dev}
    model = {"architecture": architecture, **TINY_MODEL, "embed_dim": 32, "num_layers": 2}
    return write_config(
        tmp_path / "tiny.toml",
        run_dir=run_dir,
        data={**data, "batch_size": 16},
        model={**model, "ffn_dim": 64, "positional": "sinusoidal"},
        train={**QUICK_TRAIN, "epochs": epochs, "warmup_steps": 4, "threads": None},
    )


def test_train_resume_eval_predict_attention(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_dir = tmp_path / "run"
    config = _config(tmp_path, run_dir)
    train_and_resume(config, run_dir, first=1, last=6)
    capsys.readouterr()

    assert main(["eval", str(run_dir), "--split", "test"]) == 0
    metrics = json.loads(capsys.readouterr().out)
    assert metrics["split"] == "test" and metrics["accuracy"] > 0.9

    assert main(["predict", str(run_dir), "I saw a saw"]) == 0
    tagged = capsys.readouterr().out.split()
    assert tagged[1] == "saw/VBD" and tagged[3] == "saw/NN"  # same word, two tags from context

    sentences = tmp_path / "in.txt"
    sentences.write_text("it bit the dog\n\nI saw the cat\n", encoding="utf-8")
    assert main(["predict", str(run_dir), f"@{sentences}"]) == 0
    assert len(capsys.readouterr().out.strip().splitlines()) == 2

    image = tmp_path / "map.png"
    assert main(["attention", str(run_dir), "I saw a saw", "-o", str(image)]) == 0
    assert image.stat().st_size > 1000 and image.read_bytes()[:4] == b"\x89PNG"


def test_user_mistakes_are_one_line_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = _config(tmp_path, tmp_path / "run")
    err = one_line_error(capsys, ["train", str(config), "--set", "model.no_such_field=3"])
    assert "no_such_field" in err

    bad = tmp_path / "bad.txt"
    bad.write_text("I/PRP saw/VBD\nthe dog\n", encoding="utf-8")
    config.write_text(config.read_text().replace(str(tmp_path / "train.txt"), str(bad)))
    err = one_line_error(capsys, ["train", str(config), "--no-progress"])
    assert "bad.txt:2" in err

    assert main(["eval", str(tmp_path / "missing")]) == 2
    assert "missing" in capsys.readouterr().err


def test_dev_label_never_seen_in_training_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = _config(tmp_path, tmp_path / "run")
    (tmp_path / "dev.txt").write_text("I/PRP saw/VBD a/DT saw/XX\n", encoding="utf-8")
    err = one_line_error(capsys, ["train", str(config), "--no-progress"])
    assert "dev.txt:1" in err and "'XX'" in err


def test_demo_compares_with_baselines(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = _config(tmp_path, tmp_path / "unused", epochs=6)
    image = tmp_path / "demo.png"
    argv = ["demo", "--config", str(config), "--runs", str(tmp_path / "runs"), "-o", str(image)]
    assert main([*argv, "--baselines", "fc", "--no-progress"]) == 0
    out = capsys.readouterr().out
    for name in ("self-attention", "fc", "most-frequent-tag"):
        assert name in out
    assert "I/PRP saw/VBD a/DT saw/NN" in out
    assert image.read_bytes()[:4] == b"\x89PNG"


def test_too_long_input_and_incompatible_checkpoint(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_dir = tmp_path / "run"
    config = _config(tmp_path, run_dir, epochs=1)
    learned = ["--set", "model.positional=learned", "--set", "data.max_len=8"]
    assert main(["train", str(config), "--no-progress", "--set", "train.threads=1", *learned]) == 0
    capsys.readouterr()
    # A learned table ends at 8 positions: the tagger reads 9 words in windows, but one
    # attention map needs the whole input at once.
    assert main(["predict", str(run_dir), " ".join(["saw"] * 9)]) == 0
    assert len(capsys.readouterr().out.split()) == 9
    image = tmp_path / "map.png"
    err = one_line_error(
        capsys, ["attention", str(run_dir), " ".join(["saw"] * 9), "-o", str(image)]
    )
    assert "9 tokens" in err and "max_len = 8" in err and "--truncate" in err

    manifest = run_dir / "best" / "manifest.json"
    stored = json.loads(manifest.read_text())
    stored["format_version"] = 999
    manifest.write_text(json.dumps(stored))
    err = one_line_error(capsys, ["eval", str(run_dir)])
    assert "999" in err
