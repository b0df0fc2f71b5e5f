"""A checkpoint whose weights or optimizer state belong to another model shape (its
digests updated, so the integrity check passes) is refused in one line naming the tensor,
by ``--resume`` and ``train.init_from`` as by ``eval``, before anything loads."""

from __future__ import annotations

import hashlib
import io
import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
import safetensors.torch
import torch

from ..helpers_cli import one_line_error
from ..tiny_runs import train_config, write_reviews, write_tiny_config

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A config whose run (``run`` beside it) has trained one epoch."""
    folder = tmp_path_factory.mktemp("misfit")
    config = write_tiny_config(folder, write_reviews(folder / "reviews.csv"))
    assert train_config(config, folder / "run") == 0
    return config


def _rewrite(checkpoint: Path, kind: str, data: bytes) -> None:
    """Replace the checkpoint's ``kind`` file (model or training) by ``data``, its digest
    updated as a careful forger would."""
    manifest_path = checkpoint / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    name = manifest["files"][kind]
    (checkpoint / name).unlink()  # a hard link to best's: never write through it
    (checkpoint / name).write_bytes(data)
    manifest["sha256"][name] = hashlib.sha256(data).hexdigest()
    manifest_path.write_text(json.dumps(manifest))


def _wider_weights(checkpoint: Path) -> None:
    """The head's weights of a model twice as wide."""
    manifest = json.loads((checkpoint / "manifest.json").read_text())
    weights = safetensors.torch.load_file(checkpoint / manifest["files"]["model"])
    weights["head.proj.weight"] = torch.zeros(weights["head.proj.weight"].shape[0], 32)
    _rewrite(checkpoint, "model", safetensors.torch.save(weights))


def _wider_optimizer_state(checkpoint: Path) -> None:
    """Adam's moments of a model twice as wide for the head's weights."""
    manifest = json.loads((checkpoint / "manifest.json").read_text())
    path = checkpoint / manifest["files"]["training"]
    training = torch.load(path, weights_only=True)
    state = training["optimizer"]["state"]
    index = max(state, key=lambda i: state[i]["exp_avg"].dim())  # a matrix's moments
    rows = state[index]["exp_avg"].shape[0]
    state[index] = {**state[index], "exp_avg": torch.zeros(rows, 99)}
    buffer = io.BytesIO()
    torch.save(training, buffer)
    _rewrite(checkpoint, "training", buffer.getvalue())


def _copy_run(trained: Path, tmp_path: Path, spoil: Callable[[Path], None]) -> Path:
    run_dir = tmp_path / "run"
    shutil.copytree(trained.parent / "run", run_dir)
    spoil(run_dir / "last")
    return run_dir


def _resume_spoiled(
    trained: Path, tmp_path: Path, spoil: Callable[[Path], None], capsys: pytest.CaptureFixture[str]
) -> tuple[Path, str]:
    """A copy of the trained run with ``spoil`` done to its last checkpoint, resumed: the
    run folder and the one-line error."""
    run_dir = _copy_run(trained, tmp_path, spoil)
    argv = ["train", str(trained), "--no-progress", "--resume"]
    return run_dir, one_line_error(capsys, [*argv, "--set", f"run_dir={run_dir}"])


def test_resume_refuses_weights_of_another_shape(
    trained: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_dir, err = _resume_spoiled(trained, tmp_path, _wider_weights, capsys)
    assert str(run_dir / "last") in err and "head.proj.weight" in err
    assert "[2, 32]" in err and "[2, 16]" in err, err


def test_resume_refuses_an_optimizer_state_of_another_shape(
    trained: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_dir, err = _resume_spoiled(trained, tmp_path, _wider_optimizer_state, capsys)
    assert str(run_dir / "last") in err and "optimizer" in err and "99" in err, err


def test_init_from_refuses_weights_of_another_shape(
    trained: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = _copy_run(trained, tmp_path, _wider_weights) / "last"
    argv = ["train", str(trained), "--no-progress", "--set", f"run_dir={tmp_path / 'new'}"]
    err = one_line_error(capsys, [*argv, "--set", f"train.init_from={source}"])
    assert f"train.init_from = {str(source)!r}" in err and "head.proj.weight" in err
    assert "[2, 32]" in err and "[2, 16]" in err, err


def test_eval_names_the_misfit_tensor(
    trained: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_dir = _copy_run(trained, tmp_path, _wider_weights)
    err = one_line_error(capsys, ["eval", str(run_dir / "last")])
    assert "do not fit the model" in err and "head.proj.weight" in err and "[2, 32]" in err
