"""Two machines as the guide runs them: two ``torchrun`` launchers of one process each
(``--nnodes 2``, a c10d rendezvous on 127.0.0.1, gloo on the CPU) train as one process,
and a run whose launcher was killed resumes to the same end."""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from selfattn.train.checkpoint import MANIFEST, load_checkpoint

from ..tiny_runs import train_config, write_reviews, write_tiny_config
from .test_distributed import assert_same_weights, children, losses, wait_until_gone

#: The guide's command (docs/guide.md), run on each machine; the test puts in torchrun's
#: path, 127.0.0.1 and a free port, and the config.
COMMAND = (
    "torchrun --nnodes 2 --nproc_per_node 1 --rdzv_backend c10d --rdzv_endpoint HOST:PORT "
    "-m selfattn train CONFIG"
)
GUIDE = Path(__file__).parents[2] / "docs" / "guide.md"
EPOCHS, STEPS = 4, 8  # 57 training examples in batches of 8
#: Seconds a launcher may take to fail once the other is killed, or its ranks to leave.
BOUND = 60.0


def test_the_guide_gives_the_command_tested_here() -> None:
    text = re.sub(r"\s*\\\n\s*", " ", GUIDE.read_text(encoding="utf-8"))
    assert COMMAND in text
    assert f"{COMMAND} --resume" in text


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def launcher(config: Path, port: int, log: Path, *extra: str) -> subprocess.Popen[bytes]:
    """One machine's ``torchrun`` (the guide's command), in a session of its own."""
    found = shutil.which("torchrun", path=str(Path(sys.executable).parent))
    torchrun = [found] if found else [sys.executable, "-m", "torch.distributed.run"]
    words = COMMAND.replace("HOST:PORT", f"127.0.0.1:{port}").replace("CONFIG", str(config))
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    for name in ("WORLD_SIZE", "RANK", "LOCAL_RANK", "TORCHELASTIC_RUN_ID"):
        env.pop(name, None)
    return subprocess.Popen(
        [*torchrun, *words.split()[1:], *extra],
        env=env,
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def two_machines(config: Path, name: str, *extra: str) -> list[subprocess.Popen[bytes]]:
    port = free_port()
    folder = config.parent
    return [launcher(config, port, folder / f"{name}-{node}.log", *extra) for node in (0, 1)]


def log_of(config: Path, name: str) -> str:
    return "\n".join(
        (config.parent / f"{name}-{node}.log").read_text(errors="replace")[-3000:]
        for node in (0, 1)
    )


@pytest.mark.skipif(not Path("/proc/self/stat").is_file(), reason="finds the ranks in /proc")
def test_two_launchers_train_as_one_process_and_resume_after_one_is_killed(
    tmp_path: Path,
) -> None:
    data = write_reviews(tmp_path / "train.csv", 63)
    # run_dir = tmp_path / "run", a checkpoint after every step
    config = write_tiny_config(
        tmp_path, data, epochs=EPOCHS, batch_size=8, num_layers=2, checkpoint_every=1
    )
    run_dir = tmp_path / "run"
    assert train_config(config, tmp_path / "one") == 0  # the reference: one process
    started: list[subprocess.Popen[bytes]] = []
    try:
        check_killed_and_resumed(config, run_dir, started)
    finally:  # nothing left running when the test fails
        for node in started:
            if node.poll() is None:
                os.killpg(node.pid, signal.SIGKILL)
                node.wait()
    # Every epoch's loss (the first of the killed run's, the others resumed) and the
    # weights are one process's.
    assert losses(run_dir) == pytest.approx(losses(tmp_path / "one"), abs=1e-5)
    assert len(losses(run_dir)) == EPOCHS
    assert_same_weights(tmp_path / "one" / "last", run_dir / "last")


def check_killed_and_resumed(
    config: Path, run_dir: Path, started: list[subprocess.Popen[bytes]]
) -> None:
    """Start two launchers, kill one after the first epoch, check that the other fails
    and the killed one's ranks leave, then resume on two (``started``: every launcher)."""
    nodes = two_machines(config, "killed")
    started += nodes
    deadline = time.monotonic() + 120
    metrics = run_dir / "metrics.jsonl"
    # Killed once a whole epoch of the two is logged (and a checkpoint saved).
    while not (metrics.is_file() and metrics.read_text().strip()):
        alive = all(node.poll() is None for node in nodes)
        assert alive and time.monotonic() < deadline, log_of(config, "killed")
        time.sleep(0.02)
    killed, other = nodes[1], nodes[0]
    ranks = children(killed.pid)
    assert ranks, log_of(config, "killed")
    os.killpg(killed.pid, signal.SIGKILL)  # the launcher alone: its ranks have own sessions
    killed.wait()
    # The other machine's launcher fails, in bounded time, and the killed one's ranks leave
    # (they would otherwise train on, writing into run_dir beside the resumed run).
    assert other.wait(timeout=BOUND) != 0, log_of(config, "killed")
    wait_until_gone(ranks, BOUND)
    state = load_checkpoint(run_dir / "last").state
    assert state["step"] < EPOCHS * STEPS, "the run ended before it was killed"

    nodes = two_machines(config, "resumed", "--resume")
    started += nodes
    for node in nodes:
        assert node.wait(timeout=180) == 0, log_of(config, "resumed")
    assert (run_dir / "last" / MANIFEST).is_file()
