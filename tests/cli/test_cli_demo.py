"""``selfattn demo`` trains its models in worker processes of one thread each: the same
accuracies as one training in this process, a failing worker in one line, Ctrl-C stopping
every worker."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from selfattn.cli.main import main
from selfattn.tasks import Predictor

from ..helpers_cli import QUICK_TRAIN, TINY_MODEL, write_config
from ..helpers_data import write_tagged
from ..train.test_distributed import running

#: Loaded by every process started with this folder first on PYTHONPATH (the demo's
#: workers too): training ``fc`` fails.
FAILING = """
import selfattn.cli.demo as demo
train = demo._train
def failing(job):
    if job.name == "fc":
        raise RuntimeError("boom\\nsecond line")
    return train(job)
demo._train = failing
"""


def tiny_tagger(folder: Path, epochs: int = 2) -> Path:
    """A 2-layer tagger on 64 tagged sentences (16 more as dev and test)."""
    dev = write_tagged(folder / "dev.txt", 16, 1)
    data = {"dataset": write_tagged(folder / "train.txt", 64, 0), "dev": dev, "test": dev}
    return write_config(
        folder / "tiny.toml",
        run_dir=folder / "unused",
        data={**data, "batch_size": 16},
        model={**TINY_MODEL, "architecture": "transformer", "positional": "sinusoidal"},
        train={**QUICK_TRAIN, "epochs": epochs, "warmup_steps": 4, "threads": None},
    )


def demo_args(folder: Path, config: Path, *extra: str) -> list[str]:
    runs = ["--runs", str(folder / "runs"), "-o", str(folder / "demo.png")]
    return ["demo", "--config", str(config), *runs, *extra]


def worker_pids(logs: Path) -> dict[str, int]:
    """The process each model trained in, from its log's first line."""
    pids = {}
    for log in logs.glob("*.log"):
        found = re.match(r"process (\d+): training", log.read_text())
        if found:
            pids[log.stem] = int(found.group(1))
    return pids


def run_demo(argv: list[str]) -> int:
    threads = torch.get_num_threads()
    try:
        return main(argv)
    finally:
        torch.set_num_threads(threads)


def test_models_train_in_parallel_processes_to_the_accuracy_of_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tiny_tagger(tmp_path)
    argv = demo_args(tmp_path, config, "--baselines", "fc", "cnn", "--threads", "2")
    assert run_demo(argv) == 0
    out = capsys.readouterr().out
    assert out.startswith("training 3 models in 2 processes at 1 thread each"), out
    pids = worker_pids(tmp_path / "runs" / "logs")
    assert set(pids) == {"transformer", "fc", "cnn"}
    assert len(set(pids.values())) == 2 and os.getpid() not in pids.values()
    assert out.count("  trained ") == 3  # a line as each finishes
    # The tagger of one training here, at one thread: the same test accuracy.
    alone = tmp_path / "alone"
    train = ["train", str(config), "--no-progress", "--set", f"run_dir={alone}"]
    assert run_demo([*train, "--set", "train.threads=1"]) == 0
    accuracy = Predictor(alone).evaluate("test")["accuracy"]
    assert f"  self-attention         {accuracy:.4f}" in out, out
    # The table is also written as JSON, which a record of the run reads.
    written = json.loads((tmp_path / "runs" / "results.json").read_text())
    assert written["processes"] == 2 and written["seconds"] > 0
    assert written["models"]["transformer"]["accuracy"] == round(accuracy, 4)
    assert set(written["models"]) == {"transformer", "fc", "cnn", "most-frequent-tag"}


def test_a_failing_worker_is_one_line_and_stops_the_others(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "sitecustomize.py").write_text(FAILING)
    path = os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])
    monkeypatch.setenv("PYTHONPATH", path)
    argv = demo_args(tmp_path, tiny_tagger(tmp_path), "--baselines", "fc", "--threads", "2")
    assert run_demo(argv) == 1
    err = capsys.readouterr().err.strip().splitlines()
    log = tmp_path / "runs" / "logs" / "fc.log"
    assert err == [f"selfattn demo: error: fc failed: RuntimeError: boom (its output: {log})"]
    assert "Traceback" in log.read_text()  # the whole story is in its log


@pytest.mark.skipif(not Path("/proc/self/stat").is_file(), reason="reads /proc")
def test_ctrl_c_stops_every_worker(tmp_path: Path) -> None:
    config = tiny_tagger(tmp_path, epochs=1000)
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    argv = demo_args(tmp_path, config, "--baselines", "fc", "--threads", "2")
    demo = subprocess.Popen(
        [sys.executable, "-m", "selfattn", *argv],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    logs = tmp_path / "runs" / "logs"
    deadline = time.monotonic() + 120
    while len(worker_pids(logs)) < 2:
        assert demo.poll() is None and time.monotonic() < deadline, demo.communicate()
        time.sleep(0.05)
    pids = worker_pids(logs).values()
    os.killpg(demo.pid, signal.SIGINT)  # as a terminal does: to every process of the job
    _, err = demo.communicate(timeout=60)
    assert demo.returncode == 130, err
    assert err.strip().splitlines() == ["selfattn demo: interrupted"], err
    assert not [pid for pid in pids if running(pid)]
