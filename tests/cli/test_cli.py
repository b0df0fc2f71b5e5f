"""The command line: the toy job end to end, and errors as one line."""

from __future__ import annotations

import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from selfattn.cli import toy
from selfattn.cli.main import main

from ..helpers_cli import one_line_error
from ..tiny_runs import write_reviews, write_tiny_config


def test_toy_self_attention_beats_per_vector_fc() -> None:
    """The lecture's point: a vector's label can depend on the whole set."""
    config = toy.ToyConfig(steps=150)
    attention = toy.train_and_evaluate(config, use_attention=True, progress=False)
    per_vector = toy.train_and_evaluate(config, use_attention=False, progress=False)
    assert attention > 0.95
    assert per_vector < 0.8


def test_toy_command_prints_the_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["toy", "--steps", "5", "--no-progress"]) == 0
    out = capsys.readouterr().out
    for name in ("self-attention", "FC per vector", "majority label"):
        assert name in out


def test_bad_argument_is_one_line_and_nonzero(capsys: pytest.CaptureFixture[str]) -> None:
    err = one_line_error(capsys, ["toy", "--steps", "0"])
    assert "--steps" in err


def test_console_script_version() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "selfattn.cli.main", "--version"], capture_output=True, text=True
    )
    assert done.returncode == 0 and done.stdout.startswith("selfattn ")


def test_train_help_lists_real_fields(capsys: pytest.CaptureFixture[str]) -> None:
    """The fields `train --help` suggests exist, so the help cannot point at a dead name."""
    import dataclasses
    import re

    from selfattn.config import DataConfig, TrainConfig
    from selfattn.models.registry import model_keys

    with pytest.raises(SystemExit):
        main(["train", "--help"])
    help_text = capsys.readouterr().out
    for needed in ("run_dir=", "train.threads=", "train.checkpoint_every=", "data.dev_fraction="):
        assert needed in help_text
    classes = {"data": DataConfig, "train": TrainConfig}
    suggested = re.findall(r"\b(data|train|model)\.(\w+)=", help_text)
    assert len(suggested) >= 8
    for section, name in suggested:
        names = (
            set(model_keys())  # [model]: a field of some architecture's options
            if section == "model"
            else {f.name for f in dataclasses.fields(classes[section])}
        )
        assert name in names, f"{section}.{name} is not a config field"


def test_toy_writes_no_bar_redraws_off_a_terminal() -> None:
    """Into a pipe or a log file, progress bars would be a carriage return per step."""
    result = subprocess.run(
        [sys.executable, "-m", "selfattn.cli.main", "toy", "--steps", "30", "--threads", "1"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "\r" not in result.stderr and "\r" not in result.stdout
    assert "self-attention" in result.stdout


def test_a_warning_is_one_line_naming_the_command(tmp_path: Path) -> None:
    """Not Python's ``file:line: UserWarning: …`` and the source line under it."""
    config = write_tiny_config(tmp_path, write_reviews(tmp_path / "train.csv", 40))
    done = subprocess.run(
        [sys.executable, "-m", "selfattn", "train", str(config), "--set", "train.tf32=true"],
        capture_output=True,
        text=True,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    assert done.returncode == 0, done.stderr
    warned = [line for line in done.stderr.splitlines() if "warning:" in line]
    assert warned == [
        "selfattn train: warning: train.tf32 is only used on CUDA; cpu multiplies in float32"
    ]
    assert "UserWarning" not in done.stderr and "Trainer(" not in done.stderr


def test_the_warning_format_is_given_back(tmp_path: Path) -> None:
    before = warnings.formatwarning
    config = write_tiny_config(tmp_path, write_reviews(tmp_path / "train.csv", 40))
    with pytest.warns(UserWarning, match="train.tf32"):  # still a warning to Python
        assert main(["train", str(config), "--set", "train.tf32=true", "--threads", "1"]) == 0
    assert warnings.formatwarning is before
