"""Training on several processes (torchrun, gloo on the CPU): the same run as one process."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import weakref
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.distributed as dist
from torch import nn

from selfattn.cli.main import main
from selfattn.train.checkpoint import MANIFEST, load_checkpoint
from selfattn.train.distributed import Distributed, EmptyShare, World, share, world_from_env

from ..tiny_runs import write_reviews, write_tiny_config

#: A bias that softmax attention cannot see (its gradient is 0 up to rounding, which
#: AdamW's normalisation blows up to ±lr): compared loosely.
INVISIBLE = "k_proj.bias"


def write_run(folder: Path, rows: int = 63, epochs: int = 2) -> Path:
    """A review file of ``rows`` rows and a config of a tiny model (no dropout)."""
    data = write_reviews(folder / "train.csv", rows)
    return write_tiny_config(folder, data, epochs=epochs, batch_size=8, num_layers=2)


def selfattn(*args: str, **popen: Any) -> subprocess.Popen[str]:
    """``python -m selfattn ARGS`` with one thread per process."""
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    for name in ("WORLD_SIZE", "RANK", "LOCAL_RANK", "TORCHELASTIC_RUN_ID"):
        env.pop(name, None)
    command = [sys.executable, "-m", "selfattn", *args]
    return subprocess.Popen(command, env=env, text=True, **popen)


def train(config: Path, run_dir: Path, *args: str) -> None:
    process = selfattn(
        "train",
        str(config),
        "--no-progress",
        "--set",
        f"run_dir={run_dir}",
        *args,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    output, _ = process.communicate(timeout=120)
    assert process.returncode == 0, output


def on_two_processes(
    config: Path, run_dir: Path, *args: str, **popen: Any
) -> subprocess.Popen[str]:
    """``selfattn train CONFIG --nproc 2`` into ``run_dir``, started (``popen``: how)."""
    return selfattn(
        "train",
        str(config),
        "--no-progress",
        "--nproc",
        "2",
        "--set",
        f"run_dir={run_dir}",
        *args,
        **popen,
    )


def losses(run_dir: Path) -> list[float]:
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    return [json.loads(line)["train_loss"] for line in lines]


def assert_same_weights(a: Path, b: Path, atol: float = 1e-5) -> None:
    first, second = load_checkpoint(a).model_state, load_checkpoint(b).model_state
    assert first.keys() == second.keys()  # no ``module.`` prefix
    for key, value in first.items():
        tolerance = 1e-3 if key.endswith(INVISIBLE) else atol
        torch.testing.assert_close(second[key], value, atol=tolerance, rtol=0, msg=key)


@pytest.fixture(scope="module")
def one_process(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The config and the run of one process (the reference)."""
    folder = tmp_path_factory.mktemp("distributed")
    config = write_run(folder)
    train(config, folder / "one")
    return config, folder / "one"


@pytest.mark.parametrize("strategy", ["ddp", "fsdp"])
def test_two_processes_train_as_one(one_process: tuple[Path, Path], strategy: str) -> None:
    config, reference = one_process
    run_dir = reference.parent / strategy
    train(config, run_dir, "--nproc", "2", "--set", f"train.distributed={strategy}")
    # 57 training examples in batches of 8: the last batch of 1 leaves rank 1 empty-handed.
    assert losses(run_dir) == pytest.approx(losses(reference), abs=1e-5)
    assert_same_weights(reference / "last", run_dir / "last")
    state = load_checkpoint(run_dir / "last").optimizer_state
    assert state is not None and len(state["state"]) == len(
        load_checkpoint(reference / "last").model_state
    )
    # The checkpoint loads in one process.
    threads = torch.get_num_threads()
    try:
        assert main(["eval", str(run_dir), "--split", "dev"]) == 0
    finally:
        torch.set_num_threads(threads)


@pytest.mark.parametrize("resume_with", ["1", "2-ddp", "2-fsdp"])
def test_killed_launcher_leaves_a_resumable_run(tmp_path: Path, resume_with: str) -> None:
    config = write_run(tmp_path, epochs=6)
    train(config, tmp_path / "whole", "--set", "train.checkpoint_every=1000")
    run_dir = tmp_path / "killed"
    launcher = on_two_processes(
        config,
        run_dir,
        "--set",
        "train.checkpoint_every=1",
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    deadline = time.monotonic() + 90
    while not (run_dir / "last" / MANIFEST).exists() and launcher.poll() is None:
        assert time.monotonic() < deadline
        time.sleep(0.02)
    ranks = descendants(launcher.pid)
    os.killpg(launcher.pid, signal.SIGKILL)  # the launcher and torchrun's agent
    launcher.wait()
    wait_until_gone(ranks)  # the ranks (sessions of their own) stop as their agent dies
    state = load_checkpoint(run_dir / "last").state
    assert state["step"] < 6 * 8, "the run ended before it was killed"
    extra = []
    if resume_with != "1":  # a full checkpoint: any world size, either strategy
        extra = ["--nproc", "2", "--set", f"train.distributed={resume_with[2:]}"]
    train(config, run_dir, "--resume", "--set", "train.checkpoint_every=1000", *extra)
    assert losses(run_dir) == pytest.approx(losses(tmp_path / "whole"), abs=1e-5)
    assert_same_weights(tmp_path / "whole" / "last", run_dir / "last")


def children(pid: int) -> list[int]:
    """The processes whose parent is ``pid`` (from /proc; none where there is no /proc)."""
    found = []
    for entry in os.listdir("/proc") if Path("/proc/self/stat").is_file() else []:
        with contextlib.suppress(OSError, ValueError, IndexError):
            stat = Path(f"/proc/{entry}/stat").read_text()
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry))
    return found


def descendants(pid: int) -> list[int]:
    found = children(pid)
    return found + [grandchild for child in found for grandchild in descendants(child)]


def running(pid: int) -> bool:
    """Whether ``pid`` is alive (a zombie, left for a parent to reap, is not)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def wait_until_gone(pids: list[int], seconds: float = 60.0) -> None:
    deadline = time.monotonic() + seconds
    while [pid for pid in pids if running(pid)]:
        assert time.monotonic() < deadline, f"still running: {[p for p in pids if running(p)]}"
        time.sleep(0.05)


def run_cli(*args: str) -> int:
    threads = torch.get_num_threads()
    try:
        return main(list(args))
    finally:
        torch.set_num_threads(threads)


@pytest.mark.parametrize(
    ("nproc", "message"),
    [
        ("0", "--nproc must be at least 1"),
        ("3", "3 processes do not divide data.batch_size = 8"),
        ("8", "8 processes for an epoch of only"),
    ],
)
def test_nproc_refusals(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], nproc: str, message: str
) -> None:
    config = write_run(tmp_path, rows=30)  # 27 training examples: 4 batches of 8
    assert run_cli("train", str(config), "--nproc", nproc) == 2
    err = capsys.readouterr().err
    assert err.startswith("selfattn train: error: ") and message in err
    assert len(err.strip().splitlines()) == 1


def test_nproc_inside_torchrun_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TORCHELASTIC_RUN_ID", "x")
    assert run_cli("train", str(write_run(tmp_path)), "--nproc", "2") == 2
    assert "--nproc inside torchrun" in capsys.readouterr().err


def test_world_size_without_rendezvous_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("MASTER_ADDR", "MASTER_PORT", "RANK", "LOCAL_RANK"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("WORLD_SIZE", "2")
    assert run_cli("train", str(write_run(tmp_path))) == 2
    err = capsys.readouterr().err
    assert err.startswith("selfattn train: error: torchrun without a rendezvous")


def test_share_takes_every_nth_example(monkeypatch: pytest.MonkeyPatch) -> None:
    assert share([1, 2, 3], list) == [1, 2, 3]
    monkeypatch.setenv("WORLD_SIZE", "2")
    for name, value in (("RANK", "1"), ("LOCAL_RANK", "1"), ("MASTER_ADDR", "x")):
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("MASTER_PORT", "1")
    assert world_from_env().rank == 1
    assert share([1, 2, 3, 4, 5], list) == [2, 4]
    assert share([1], list) == EmptyShare([1])


class _SumLoss:
    def loss(self, model: nn.Module, batch: torch.Tensor, step: int) -> torch.Tensor:
        return model(batch).sum()


def test_close_lets_ddp_go_before_the_group_ends() -> None:
    """Nothing of the DDP wrapper outlives close(): its reducer holds the process group,
    which would otherwise end during interpreter shutdown (where gloo can abort)."""
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        group = Distributed(World(rank=0, size=2), "ddp")  # size > 1: the group's path
        group.start(torch.device("cpu"))
        step = group.wrap(nn.Linear(3, 2), _SumLoss())
        step(torch.ones(4, 3), 0).backward()  # the reducer has run once
        wrapper = weakref.ref(step)
        del step
        group.close()
        assert not dist.is_initialized()
        assert wrapper() is None
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()


#: Loaded by every process of a run (``PYTHONPATH``): the sequence task's loss is nan at
#: optimizer step 3 on rank ``RANK`` only; the all-reduced loss is then nan on every rank.
POISON = """
import math, os
from selfattn.tasks.task import TASKS
task = TASKS["sequence"]
clean = task.loss
def poisoned(self, model, batch, step):
    loss = clean(self, model, batch, step)
    bad = step == 3 and os.environ.get("RANK", "0") == "{rank}"
    return loss * math.nan if bad else loss
task.loss = poisoned
"""


@pytest.mark.parametrize("policy", ["stop", pytest.param("skip", marks=pytest.mark.slow)])
def test_a_loss_that_is_not_finite_on_one_rank_stops_or_skips_on_every_rank(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, policy: str
) -> None:
    config = write_run(tmp_path, epochs=1)
    (tmp_path / "sitecustomize.py").write_text(POISON.replace("{rank}", "1"))
    path = os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])
    monkeypatch.setenv("PYTHONPATH", path)
    process = on_two_processes(
        config,
        tmp_path / "run",
        "--set",
        f"train.nan_policy={policy}",
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    output, _ = process.communicate(timeout=120)  # a rank left waiting would time out
    if policy == "stop":  # both ranks stop at the same step, each saying why in one line
        assert process.returncode == 2, output
        stopped = "selfattn train: error: the training loss is nan at epoch 1, step 4 of 8;"
        assert output.count(stopped) == 2, output
        # and torchrun's own report of the failed ranks (a traceback and a table) is left out
        assert "Traceback" not in output and "ChildFailedError" not in output, output
        assert "SIGTERM" not in output and "exitcode" not in output, output  # nor its log
    else:
        assert process.returncode == 0, output
        assert "skipped 1 step (loss not finite)" in output


#: A rank's life in a fresh interpreter: the group made by start(), DDP (which imports
#: torch.distributed.nn on first use), one step, close(); then the threads left.
_ONE_RANK = """
import os, torch
from torch import nn
from selfattn.train.distributed import Distributed, World

class SumLoss:
    def loss(self, model, batch, step):
        return model(batch).sum()

group = Distributed(World(rank=0, size=2), "ddp")  # size > 1: the group's path
group.start(torch.device("cpu"))
step = group.wrap(nn.Linear(3, 2), SumLoss())
step(torch.ones(4, 3), 0).backward()
del step
group.close()
tasks = "/proc/self/task"
print(*(open(f"{tasks}/{task}/comm").read().strip() for task in os.listdir(tasks)))
"""


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="lists threads from /proc")
def test_close_ends_the_group_and_its_threads() -> None:
    """After close() no gloo thread runs: the group ended there, not during interpreter
    shutdown (where a rank can abort). It outlived close() while torch.distributed.nn,
    imported after the group was made, kept it as a default argument."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "RANK": "0", "WORLD_SIZE": "1"}
    env.update(MASTER_ADDR="127.0.0.1", MASTER_PORT="0", LOCAL_RANK="0")
    done = subprocess.run(
        [sys.executable, "-c", _ONE_RANK], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    threads = done.stdout.split()
    assert threads and not [name for name in threads if "gloo" in name], threads
