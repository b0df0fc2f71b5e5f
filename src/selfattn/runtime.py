"""CPU threads: a default that stays fast when other processes share the machine.

PyTorch runs its CPU kernels on OpenMP threads (the pip wheels: GNU libgomp), one per core
by default. Two things then make small-model training crawl 5–70× as soon as any other
process keeps a core busy (``benchmarks/shared_cpu.py`` measures both, and the cures):

* **Spinning.** A thread that reaches the end of a parallel region first busy-waits for
  the others: libgomp spins 300,000 times before it sleeps. When the thread it waits for
  has lost its core to another process, the spinner burns the time slice that thread
  needs, and a training step opens hundreds of parallel regions. libgomp drops to 100
  spins when its own threads outnumber the cores, but it cannot see other processes.
  :func:`prepare_environment` sets ``GOMP_SPINCOUNT=1000``: a run alone on an idle
  machine loses 5–10%, where sleeping at once (``OMP_WAIT_POLICY=PASSIVE``) loses a third
  to half of its speed. OpenMP reads the variable once, when torch loads it, so
  ``import selfattn`` calls this before it imports torch — the ``selfattn`` command
  included. It sets nothing when torch is already loaded (too late) or when
  ``GOMP_SPINCOUNT`` or ``OMP_WAIT_POLICY`` is set already: yours wins. (Intel's OpenMP,
  in some conda builds of torch, ignores it; its setting is ``KMP_BLOCKTIME``.)
* **More threads than free cores.** :func:`default_threads` counts the cores that other
  processes left idle while the command started (``/proc/stat``) and uses that many, at
  least one. Every ``selfattn`` command that computes applies it when it starts, unless given
  ``--threads N`` (:func:`configure_threads`); ``train.threads`` then overrides it for a
  training. The count can thus differ from run to run: pass ``--threads N`` where a
  run must repeat bit for bit.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from collections.abc import MutableMapping
from pathlib import Path

# Set before torch's OpenMP runtime loads, unless any of SPIN_VARIABLES is set already.
OPENMP_ENVIRONMENT = {"GOMP_SPINCOUNT": "1000"}
SPIN_VARIABLES = ("GOMP_SPINCOUNT", "OMP_WAIT_POLICY")
SAMPLE_SECONDS = 0.1  # the shortest load sample
STARTUP_SECONDS = 10.0  # the longest: measured from import, see busy_cores
THREADS_HELP = (
    "CPU threads for PyTorch (default: as many as the cores other processes leave idle, "
    "at least 1; see selfattn.runtime)"
)


def prepare_environment(environ: MutableMapping[str, str] | None = None) -> bool:
    """Make OpenMP's idle threads spin briefly before they sleep (see the module docstring).

    Args:
        environ: the environment to change (default: ``os.environ``).

    Returns:
        Whether anything was set: ``False`` when torch is already imported (too late) or
        when a variable of :data:`SPIN_VARIABLES` is set already.
    """
    environ = os.environ if environ is None else environ
    if "torch" in sys.modules or any(name in environ for name in SPIN_VARIABLES):
        return False
    environ.update(OPENMP_ENVIRONMENT)
    return True


def busy_cores(seconds: float = SAMPLE_SECONDS) -> float:
    """Cores kept busy by other processes, on average: since this module was imported —
    i.e. over a ``selfattn`` command's start-up, at no cost — if that was at most
    :data:`STARTUP_SECONDS` ago, else over the next ``seconds``. NaN without
    ``/proc/stat``."""
    start = _IMPORTED
    if start is None or time.monotonic() - start[0] > STARTUP_SECONDS:
        start = _counters()
    if start is None:
        return float("nan")
    time.sleep(max(0.0, start[0] + seconds - time.monotonic()))
    end = _counters()
    if end is None:
        return float("nan")
    wall, machine, own = (after - before for before, after in zip(start, end, strict=True))
    # /proc/stat counts in clock ticks (10 ms): over a short sample a tick landing inside
    # it can read as more busy cores than the machine has (2.09 of 2 seen under load).
    return min(float(os.cpu_count() or 1), max(0.0, (machine - own) / wall))


def machine_busy_seconds() -> float:
    """Non-idle CPU seconds of the whole machine since boot, from ``/proc/stat`` (NaN
    where there is none). The benchmarks read it too, to flag rows timed under load."""
    try:
        with open("/proc/stat") as f:
            fields = [int(value) for value in f.readline().split()[1:]]
    except (OSError, ValueError):
        return float("nan")
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def _counters() -> tuple[float, float, float] | None:
    """``(monotonic time, busy CPU seconds of the whole machine, this process's CPU
    seconds)``; ``None`` without ``/proc/stat``."""
    machine = machine_busy_seconds()
    if machine != machine:  # NaN
        return None
    return time.monotonic(), machine, time.process_time()


_IMPORTED = _counters()


def available_cores() -> int:
    """Cores this process may run on (its affinity mask), counting the hyper-threads of
    one core once, as PyTorch's own default does."""
    try:
        cpus = os.sched_getaffinity(0)
    except AttributeError:  # not Linux
        return os.cpu_count() or 1
    cores = set()
    for cpu in cpus:
        siblings = Path(f"/sys/devices/system/cpu/cpu{cpu}/topology/thread_siblings_list")
        try:
            cores.add(siblings.read_text().strip())
        except OSError:
            cores.add(str(cpu))
    return len(cores)


def default_threads(busy: float | None = None, cores: int | None = None) -> int:
    """The default thread count: cores that other processes leave idle, at least one.

    Args:
        busy: cores kept busy by other processes (default: :func:`busy_cores` now).
        cores: cores this process may use (default: :func:`available_cores`).
    """
    cores = available_cores() if cores is None else cores
    busy = busy_cores() if busy is None else busy
    if math.isnan(busy):  # no load reading: every core
        return cores
    return max(1, cores - int(busy + 0.5))


def configure_threads(threads: int | None) -> int:
    """Set PyTorch's intra-op thread count: ``threads``, or :func:`default_threads` for
    ``None``. Returns the count in use.

    Raises:
        ValueError: ``threads`` < 1.
    """
    import torch  # here: importing this module must not load torch (prepare_environment)

    if threads is not None and threads < 1:
        raise ValueError(f"threads must be >= 1, got {threads}")
    count = default_threads() if threads is None else threads
    torch.set_num_threads(count)
    return count


def add_threads_argument(parser: argparse.ArgumentParser) -> None:
    """``--threads N`` of every ``selfattn`` command that computes."""
    parser.add_argument("--threads", type=int, metavar="N", help=THREADS_HELP)
