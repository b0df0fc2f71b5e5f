"""``selfattn train`` as a real process: killed or interrupted, it resumes to the run it
would have been; its logs in files are plain lines; resume and checkpoint mistakes are one
line each."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import torch

from selfattn.cli.main import main
from selfattn.train import TIMING_KEYS, load_checkpoint

from ..helpers_cli import TINY_MODEL, one_line_error, write_config
from ..helpers_data import write_tagged

SELFATTN = [sys.executable, "-m", "selfattn.cli.main"]
# Small and quick, yet 75 steps an epoch: time enough to stop a run in the middle of one.
SETTINGS = ["--set", "train.threads=1", "--no-progress"]
STEPS = 75


@pytest.fixture(scope="module")
def config(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("data")
    dev = write_tagged(folder / "dev.txt", 40, 1)
    data = {"dataset": write_tagged(folder / "train.txt", 8 * STEPS, 0), "dev": dev}
    return write_config(
        folder / "tiny.toml",
        data={**data, "test": dev, "batch_size": 8},
        model={**TINY_MODEL, "dropout": 0.1},
        train={"epochs": 3, "warmup_steps": 4, "device": "cpu"},
    )


def _start(config: Path, run_dir: Path, *extra: str) -> tuple[subprocess.Popen[bytes], Path]:
    """``selfattn train`` in the background; stdout and stderr go to files in ``run_dir``'s
    parent, whose paths are returned (stderr's; stdout's is beside it)."""
    logs = run_dir.parent / f"{run_dir.name}-{len(list(run_dir.parent.glob('*.err')))}"
    argv = [*SELFATTN, "train", str(config), "--set", f"run_dir={run_dir}", *SETTINGS, *extra]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    with open(f"{logs}.out", "wb") as out, open(f"{logs}.err", "wb") as err:
        process = subprocess.Popen(argv, stdout=out, stderr=err, env=env, cwd=config.parent)
    return process, Path(f"{logs}.err")


def _finish(process: subprocess.Popen[bytes], err: Path) -> tuple[int, str, str]:
    code = process.wait(timeout=300)
    return code, err.with_suffix(".out").read_text(), err.read_text()


def _wait_until(condition: Any, process: subprocess.Popen[bytes], what: str) -> Any:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if (found := condition()) is not None:
            return found
        assert process.poll() is None, f"training ended before {what}"
        time.sleep(0.01)
    process.kill()
    raise AssertionError(f"no {what} after 120 s")


def _mid_epoch_state(run_dir: Path, epoch: int) -> Any:
    """``last``'s loop state if it was saved within epoch ``epoch`` (from 1) or a later
    one, else None."""
    try:
        state = json.loads((run_dir / "last" / "manifest.json").read_text())["state"]
    except (OSError, ValueError, KeyError):
        return None
    return state if state["epoch"] + 1 >= epoch and state["batch"] > 0 else None


def _without_timing(run_dir: Path) -> list[dict[str, Any]]:
    lines = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return [{k: v for k, v in line.items() if k not in TIMING_KEYS} for line in lines]


def _assert_same_run(run_dir: Path, reference: Path) -> None:
    assert _without_timing(run_dir) == _without_timing(reference)
    ours = load_checkpoint(run_dir / "last").model_state
    theirs = load_checkpoint(reference / "last").model_state
    assert ours.keys() == theirs.keys()
    assert all(torch.equal(ours[key], theirs[key]) for key in ours)


@pytest.fixture(scope="module")
def uninterrupted(config: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An uninterrupted run, its stdout and stderr written to files."""
    run_dir = tmp_path_factory.mktemp("uninterrupted") / "run"
    process, err = _start(config, run_dir)
    code, out, log = _finish(process, err)
    assert code == 0, log
    (run_dir.parent / "stdout").write_text(out)
    (run_dir.parent / "stderr").write_text(log)
    return run_dir


@pytest.mark.slow
def test_logs_in_files_are_plain_lines_with_every_epochs_metrics(uninterrupted: Path) -> None:
    out = (uninterrupted.parent / "stdout").read_text()
    err = (uninterrupted.parent / "stderr").read_text()
    assert "\r" not in out and "\r" not in err
    assert f"3 epochs of {STEPS} steps" in err
    for epoch in (1, 2, 3):
        line = re.search(rf"^epoch {epoch}/3  train loss .*$", err, re.M)
        assert line is not None, err
        assert all(word in line[0] for word in ("dev loss", "accuracy", "count", "best epoch"))
    assert "best epoch" in out and "checkpoints:" in out


@pytest.mark.slow
def test_killed_mid_epoch_then_resumed_equals_uninterrupted(
    config: Path, uninterrupted: Path, tmp_path: Path
) -> None:
    run_dir = tmp_path / "run"
    every = ["--set", "train.checkpoint_every=5"]
    process, _ = _start(config, run_dir, *every)
    state = _wait_until(lambda: _mid_epoch_state(run_dir, 2), process, "a save in epoch 2")
    process.send_signal(signal.SIGKILL)
    assert process.wait(timeout=60) == -signal.SIGKILL
    assert state["batch"] % 5 == 0 and 0 < state["batch"] < STEPS

    process, err = _start(config, run_dir, *every, "--resume")
    code, _, log = _finish(process, err)
    assert code == 0, log
    assert re.search(rf"resuming {re.escape(str(run_dir))} from epoch \d, step \d+ of {STEPS}", log)
    _assert_same_run(run_dir, uninterrupted)


@pytest.mark.slow
def test_ctrl_c_in_the_first_epoch_saves_and_says_how_to_continue(
    config: Path, uninterrupted: Path, tmp_path: Path
) -> None:
    """The default checkpoint_every would first save after two minutes: Ctrl-C saves now."""
    run_dir = tmp_path / "run"
    process, err = _start(config, run_dir)
    _wait_until(lambda: "training " in err.read_text() or None, process, "training")
    process.send_signal(signal.SIGINT)
    code, _, log = _finish(process, err)
    assert code == 130, log
    assert "Traceback" not in log
    assert "stopping after this step… (Ctrl-C again to quit at once)" in log
    saved = re.escape(f"checkpoint saved in {run_dir / 'last'}")
    message = re.search(
        rf"interrupted (at|after) epoch (\d)(, step (\d+) of {STEPS})?; {saved}", log
    )
    assert message is not None, log
    state = load_checkpoint(run_dir / "last").state
    if message[1] == "at":  # within an epoch, as nearly always: `last` is saved right there
        assert (state["epoch"] + 1, state["batch"]) == (int(message[2]), int(message[4]))

    found = re.search(r"^continue with: (.*)$", log, re.M)
    assert found is not None, log
    command = shlex.split(found[1])
    assert command[:2] == ["selfattn", "train"] and command[-1] == "--resume"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    resumed = subprocess.run(
        [*SELFATTN, *command[1:]], capture_output=True, text=True, env=env, cwd=config.parent
    )
    assert resumed.returncode == 0, resumed.stderr
    assert "resuming" in resumed.stderr
    _assert_same_run(run_dir, uninterrupted)


def test_nothing_to_resume_is_said_in_one_line(
    config: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    nowhere = tmp_path / "nowhere"
    err = one_line_error(capsys, ["train", str(config), "--set", f"run_dir={nowhere}", "--resume"])
    assert f"{nowhere} does not exist" in err

    killed_early = tmp_path / "early"  # a run killed before its first save
    killed_early.mkdir()
    (killed_early / "config.toml").write_text("")
    err = one_line_error(
        capsys, ["train", str(config), "--set", f"run_dir={killed_early}", "--resume"]
    )
    assert "holds no checkpoint yet" in err and "--overwrite" in err


@pytest.mark.slow
@pytest.mark.parametrize("damage", ["truncated weights", "refused training state"])
def test_eval_of_a_damaged_checkpoint_is_one_line(
    uninterrupted: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], damage: str
) -> None:
    run_dir = tmp_path / "run"
    shutil.copytree(uninterrupted, run_dir)
    best = run_dir / "best"
    manifest = json.loads((best / "manifest.json").read_text())
    del manifest["sha256"]  # no digests to catch it: the readers must
    (best / "manifest.json").write_text(json.dumps(manifest))
    if damage == "truncated weights":
        victim = best / manifest["files"]["model"]
        victim.write_bytes(victim.read_bytes()[:100])
    else:
        victim = best / manifest["files"]["training"]
        torch.save({"rng": Path("not a tensor")}, victim)
    err = one_line_error(capsys, ["eval", str(run_dir)])
    assert str(victim) in err


@pytest.mark.slow
def test_predict_names_what_a_folder_lacks_and_reads_a_run_stopped_in_epoch_one(
    uninterrupted: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    nowhere = tmp_path / "nowhere"
    err = one_line_error(capsys, ["predict", str(nowhere), "I saw a saw"])
    assert f"{nowhere} does not exist" in err

    killed_early = tmp_path / "early"  # a run killed before its first save
    killed_early.mkdir()
    (killed_early / "config.toml").write_text("")
    err = one_line_error(capsys, ["predict", str(killed_early), "I saw a saw"])
    assert "no checkpoint yet" in err

    stopped = tmp_path / "stopped"  # stopped within epoch 1: `last` only, no `best` yet
    stopped.mkdir()
    shutil.copytree(uninterrupted / "last", stopped / "last")
    assert main(["predict", str(stopped), "I saw a saw"]) == 0
    assert len(capsys.readouterr().out.split()) == 4  # one tag per word
