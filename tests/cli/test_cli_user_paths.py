"""A user's path that cannot be used (a run folder that is a file or not writable, an
export target, a dataset that is a folder or a device, an @FILE that is not UTF-8) is one
line naming it, exit 2; a bad ``--set`` or config section is blamed on where it was
written; Ctrl-C before training says what became of the run, exit 130."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import pytest

from selfattn.cli import model_cmds
from selfattn.cli.main import main

from ..helpers_cli import one_line_error, set_flags
from ..tiny_runs import train_config, write_reviews, write_tiny_config

pytestmark = pytest.mark.usefixtures("one_thread")

AS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0


@pytest.fixture(scope="module")
def config(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("paths")
    return write_tiny_config(folder, write_reviews(folder / "reviews.csv"))


@pytest.fixture(scope="module")
def trained(config: Path) -> Path:
    """The run folder of ``config``, trained one epoch."""
    assert train_config(config, config.parent / "run") == 0
    return config.parent / "run"


def _train(config: Path, *settings: str) -> list[str]:
    return ["train", str(config), "--no-progress", *set_flags(*settings)]


# ------------------------------------------------------------------ run folders


def test_a_run_dir_that_is_a_file_is_named(
    config: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    taken = tmp_path / "a-file"
    taken.write_text("")
    err = one_line_error(capsys, _train(config, f"run_dir={taken}"))
    assert err.startswith("selfattn train: error: ") and str(taken) in err
    assert "not a folder" in err, err
    below = taken / "run"  # a folder to create inside the file
    err = one_line_error(capsys, _train(config, f"run_dir={below}"))
    assert str(below) in err or str(taken) in err, err


@pytest.mark.skipif(AS_ROOT, reason="root writes into a read-only folder")
def test_a_run_dir_that_is_not_writable_is_named(
    config: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(stat.S_IRUSR | stat.S_IXUSR)
    try:
        for run_dir in (locked, locked / "run"):
            err = one_line_error(capsys, _train(config, f"run_dir={run_dir}"))
            assert str(locked) in err and "ermission denied" in err, err
    finally:
        locked.chmod(stat.S_IRWXU)


def test_an_os_error_on_a_users_path_is_one_line(
    config: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: Any
) -> None:
    """Where no check comes first, an OSError that names a path still ends in one line
    naming it (a permission refused to root too: a read-only mount, a full disk)."""
    victim = tmp_path / "somewhere"

    def refuse(*args: object, **kwargs: object) -> None:
        raise PermissionError(13, "Permission denied", str(victim))

    monkeypatch.setattr(model_cmds, "run", refuse)
    err = one_line_error(capsys, _train(config))
    assert err == f"selfattn train: error: {victim}: Permission denied"


# ------------------------------------------------------------------ export


@pytest.mark.skipif(not Path("/sys/kernel").is_dir(), reason="needs Linux's /sys")
def test_an_export_target_that_cannot_be_written_is_named(
    trained: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = Path("/sys/selfattn-export.onnx")
    err = one_line_error(capsys, ["export", str(trained), "--format", "onnx", "-o", str(target)])
    assert str(target) in err and "cannot write" in err, err
    assert "cannot be exported" not in err, err


# ------------------------------------------------------------------ --set and TOML


def test_a_bad_set_is_blamed_on_itself_not_on_an_earlier_one(
    config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    err = one_line_error(capsys, _train(config, "train.epochs=1", "train.epochs=abc"))
    assert err.endswith("(from --set train.epochs=abc)"), err
    err = one_line_error(capsys, _train(config, "train.epochs=0", "train.epochs=abc"))
    assert err.endswith("(from --set train.epochs=abc)"), err


def test_a_bad_file_value_is_blamed_on_the_file_not_on_a_set(
    config: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("[bogus]\nx = 1\n" + config.read_text(), encoding="utf-8")
    err = one_line_error(capsys, _train(bad, f"run_dir={tmp_path / 'run'}", "train.lr=0.1"))
    assert f"{bad}: unknown config section(s) bogus" in err and "--set" not in err, err
    zero = tmp_path / "zero.toml"
    zero.write_text(config.read_text().replace("epochs = 1", "epochs = 0"), encoding="utf-8")
    err = one_line_error(capsys, _train(zero, "train.epochs_typo=3"))
    assert "--set train.epochs_typo=3" in err, err  # the unknown key is the --set's
    err = one_line_error(capsys, _train(zero, "train.lr=0.1"))
    assert err.startswith(f"selfattn train: error: {zero}: train.epochs must"), err


# ------------------------------------------------------------------ data files


def test_a_dataset_that_is_a_folder_or_a_device_says_so(
    config: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    err = one_line_error(capsys, _train(config, f"data.dataset={tmp_path}"))
    assert str(tmp_path) in err and "a folder" in err and "no such file" not in err, err
    if Path("/dev/null").exists():
        err = one_line_error(capsys, _train(config, "data.dataset=/dev/null"))
        assert "/dev/null" in err and "not a regular file" in err, err


def test_an_input_file_that_is_not_utf8_is_named(
    trained: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    inputs = tmp_path / "inputs.txt"
    inputs.write_bytes(b"a warm film\na \xff great film\n")
    err = one_line_error(capsys, ["predict", str(trained), f"@{inputs}"])
    assert f"{inputs}:2" in err and "UTF-8" in err and "byte 14" in err, err


# ------------------------------------------------------------------ Ctrl-C


@pytest.fixture
def ctrl_c_in_training(monkeypatch: pytest.MonkeyPatch) -> None:
    """Training (after the config is read) raises KeyboardInterrupt at once."""

    def interrupted(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(model_cmds, "run", interrupted)


@pytest.mark.usefixtures("ctrl_c_in_training")
def test_ctrl_c_while_starting_says_nothing_was_trained(
    config: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(_train(config, f"run_dir={tmp_path / 'run'}")) == 130
    err = capsys.readouterr().err.strip()
    assert err.startswith("selfattn train: interrupted") and "nothing" in err, err
    assert "\n" not in err


@pytest.mark.usefixtures("ctrl_c_in_training")
def test_ctrl_c_while_resuming_gives_the_resume_command(
    config: Path, trained: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = [*_train(config, f"run_dir={trained}", "train.epochs=2"), "--resume"]
    assert main(argv) == 130
    first, second = capsys.readouterr().err.strip().split("\n")
    assert first.startswith("selfattn train: interrupted") and str(trained / "last") in first
    assert second.startswith("continue with: selfattn train") and second.endswith("--resume")
