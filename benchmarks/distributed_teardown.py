"""The distributed teardown: how many two-process runs end in an abort.

Each run is a fresh ``torchrun --standalone --nproc_per_node 2`` job on the CPU (gloo),
one thread per rank. A run *aborts* when it exits with a non-zero status; the script
prints how many did, the exit statuses and how many printed ``terminate called`` (a
rank killed by ``std::terminate`` in its teardown), then ``aborts: k / n``, and exits
with status 1 if any run aborted.

The cause such an abort had: the process group outlived ``Distributed.close()`` (gloo's
threads still running), to be torn down while the interpreter shut down. The
``minimal`` job (Linux) also counts the ranks on which it did: each rank lists its
threads after ``close()``, and a ``gloo`` thread among them is a group that outlived it.

``--what`` picks the job:

* ``train`` (the default): ``selfattn train CONFIG --nproc 2`` of a tiny model (two
  layers, E = 16) on 63 made-up reviews for one epoch (8 steps), written into a
  temporary folder; about 20 s a run on an idle 2-core machine.
* ``minimal``: each rank joins the group with :class:`~selfattn.train.distributed.Distributed`,
  wraps a linear layer in DDP, takes a few steps (the loss scaling's all-reduce, the
  gradient all-reduce, the loop's vote), leaves with ``Distributed.close()`` and exits:
  the same teardown without the data, model or checkpoints (a few seconds a run).

Usage::

    python benchmarks/distributed_teardown.py                     # 50 train runs, ~20 min
    python benchmarks/distributed_teardown.py --what minimal --runs 50
    python benchmarks/distributed_teardown.py --keep /tmp/logs    # each aborted run's output
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

CONFIG = """run_dir = "{folder}/run"

[data]
dataset = "{folder}/train.csv"
batch_size = 8
max_len = 48

[model]
architecture = "transformer"
embed_dim = 16
num_heads = 2
num_layers = 2
ffn_dim = 16
dropout = 0.0

[train]
epochs = 1
warmup_steps = 1
device = "cpu"
threads = 1
"""


def write_train_run(folder: Path, rows: int = 63) -> Path:
    """A CSV of ``rows`` reviews and the config of a tiny model trained on it."""
    rng = random.Random(0)
    good, bad = ["warm", "funny", "best", "great"], ["dull", "long", "mess", "worst"]
    lines = ["label,text"]
    for i in range(rows):
        words = [rng.choice(good if i % 2 else bad) for _ in range(rng.randint(1, 5))]
        lines.append(f"{('neg', 'pos')[i % 2]},a {' '.join(words)} film")
    (folder / "train.csv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    config = folder / "config.toml"
    config.write_text(CONFIG.format(folder=folder), encoding="utf-8")
    return config


def command(what: str, folder: Path) -> list[str]:
    """The command line of one run."""
    if what == "train":
        config = write_train_run(folder)
        return [
            sys.executable,
            "-m",
            "selfattn",
            "train",
            str(config),
            "--nproc",
            "2",
            "--threads",
            "1",
            "--no-progress",
            "--overwrite",
        ]
    return [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc_per_node",
        "2",
        __file__,
        "--rank-body",
    ]


def gloo_threads() -> int:
    """This process's threads that gloo started (``gloo_tcp_loop``, ``pt_gloo_runloop``);
    -1 where ``/proc`` does not list threads."""
    tasks = Path("/proc/self/task")
    if not tasks.is_dir():
        return -1
    names = []
    for task in tasks.iterdir():
        with contextlib.suppress(OSError):  # a thread that ended meanwhile
            names.append((task / "comm").read_text().strip())
    return sum("gloo" in name for name in names)


def rank_body(steps: int = 4) -> int:
    """One rank of the ``minimal`` job: join, train a linear layer a few steps, leave,
    then say how many gloo threads are left."""
    import torch
    from torch import nn

    from selfattn.train.distributed import Distributed, world_from_env

    class SumLoss:
        def loss(self, model: nn.Module, batch: torch.Tensor, step: int) -> torch.Tensor:
            return model(batch).sum()

    torch.manual_seed(0)
    group = Distributed(world_from_env(), "ddp", timeout=60)
    device = group.start(torch.device("cpu"))
    model = nn.Linear(4, 2)
    step = group.wrap(model, SumLoss())
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for i in range(steps):
        loss, _ = group.reduce(step(torch.ones(3, 4, device=device), i), 3, 3)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        group.agree(False)
    del step
    group.close()
    print(f"rank {group.world.rank}: {gloo_threads()} gloo threads after close()", flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--what", choices=["train", "minimal"], default="train")
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--timeout", type=float, default=300, help="seconds a run may take")
    parser.add_argument("--keep", type=Path, help="write each aborted run's output here")
    parser.add_argument("--rank-body", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.rank_body:
        return rank_body()
    environ = {**os.environ, "OMP_NUM_THREADS": "1"}
    for name in ("WORLD_SIZE", "RANK", "LOCAL_RANK", "TORCHELASTIC_RUN_ID"):
        environ.pop(name, None)
    statuses: Counter[int] = Counter()
    terminated = 0
    outlived = checked = 0
    seconds: list[float] = []
    for run in range(1, args.runs + 1):
        with tempfile.TemporaryDirectory(prefix="teardown-") as folder:
            started = time.monotonic()
            try:
                done = subprocess.run(
                    command(args.what, Path(folder)),
                    env=environ,
                    capture_output=True,
                    text=True,
                    timeout=args.timeout,
                )
                status, output = done.returncode, done.stdout + done.stderr
            except subprocess.TimeoutExpired as error:
                status, output = -1, f"timed out after {error.timeout} s\n"
            seconds.append(time.monotonic() - started)
        statuses[status] += 1
        terminated += "terminate called" in output
        for found in re.finditer(r"rank \d+: (-?\d+) gloo threads after close", output):
            checked += int(found[1]) >= 0
            outlived += int(found[1]) > 0
        if status != 0:
            print(f"run {run}: exit {status}", flush=True)
            if args.keep:
                args.keep.mkdir(parents=True, exist_ok=True)
                (args.keep / f"run{run}.log").write_text(output, encoding="utf-8")
    aborts = args.runs - statuses[0]
    seconds.sort()
    print(
        f"{args.what}: {args.runs} runs, median {seconds[len(seconds) // 2]:.1f} s a run; "
        f"exit statuses {dict(sorted(statuses.items()))}; "
        f"'terminate called' in {terminated}"
    )
    if args.what == "minimal":
        print(f"group outlived close() on {outlived} of {checked} ranks")
    print(f"aborts: {aborts} / {args.runs}")
    return 1 if aborts else 0


if __name__ == "__main__":
    sys.exit(main())
