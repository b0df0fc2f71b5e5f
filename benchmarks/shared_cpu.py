"""Training speed on a shared CPU: one run alone, beside a busy process, and two at once.

Each run is a separate process training a small transformer encoder (selfattn's
``Encoder`` + a linear head, forward + backward + AdamW on generated batches; no data to
fetch). A *setting* says how a process configures its CPU threads. For each setting the
script times one run alone, one run beside a pure-Python busy loop (any other busy
process), and two runs started together, and prints steps/s and the ratio each of the
two ÷ alone (on 2 cores, 0.5 is a fair share and 1.0 is the ideal; near 0 is threads
spinning against each other). Settings are interleaved over ``--repeats`` rounds, so
drifting background load hits all of them; the table gives medians, and the ratio's
spread (min–max). ``old`` — PyTorch's own default — is the reference measured in the same
run: ``÷ old`` is a setting's speed alone ÷ old's, i.e. what the setting costs when the
machine is NOT shared. Measuring "alone" needs an otherwise idle machine: the ``others``
column says how many cores other processes kept busy meanwhile.

A setting is ``old``, ``default`` (what every ``selfattn`` command does without
``--threads``: ``import selfattn`` sets OpenMP's spin count before torch loads, then
:func:`selfattn.runtime.configure_threads` picks the count), or comma-separated parts: a
thread count (``1``, ``2``), ``load`` (the count of :func:`selfattn.runtime.default_threads`
without the spin setting), ``pin`` (each process bound to one core, round-robin, with
``os.sched_setaffinity``), and ``NAME=VALUE`` environment variables that must be set
before torch's OpenMP runtime loads, e.g. ``2,OMP_WAIT_POLICY=PASSIVE``.

Usage::

    python benchmarks/shared_cpu.py                          # old vs default, ~3 min
    python benchmarks/shared_cpu.py --settings 1 2,GOMP_SPINCOUNT=1000 1,pin load
    python benchmarks/shared_cpu.py --model d256 --alone-only --repeats 6
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from dataclasses import dataclass, field
from subprocess import PIPE, Popen

# Threading variables a setting may add; removed from every worker's environment first, so
# the caller's own shell settings do not leak into the comparison.
THREAD_VARIABLES = (
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "OMP_WAIT_POLICY",
    "GOMP_SPINCOUNT",
    "OMP_PROC_BIND",
    "OMP_PLACES",
)
MODELS = {  # name → (embed_dim, num_heads, num_layers, ffn_dim, batch, length)
    "small": (128, 4, 2, 512, 16, 32),
    "d256": (256, 4, 4, 1024, 16, 32),
}


@dataclass(frozen=True)
class Setting:
    """How a worker process sets up its CPU threads."""

    name: str
    threads: int | None = None  # None: torch's default (or the policy, for default/load)
    env: tuple[tuple[str, str], ...] = ()
    pin: bool = False
    load_aware: bool = False
    selfattn_default: bool = False


def parse_setting(text: str) -> Setting:
    """``old`` | ``default`` | comma-separated ``N``, ``load``, ``pin``, ``NAME=VALUE``."""
    if text == "old":
        return Setting(text)
    if text == "default":
        return Setting(text, selfattn_default=True)
    threads, env, pin, load = None, [], False, False
    for part in filter(None, (p.strip() for p in text.split(","))):
        if part.isdigit() and int(part) > 0:
            threads = int(part)
        elif part == "pin":
            pin = True
        elif part == "load":
            load = True
        elif "=" in part:
            name, value = part.split("=", 1)
            env.append((name, value))
        else:
            raise argparse.ArgumentTypeError(f"unknown setting part {part!r} in {text!r}")
    return Setting(text, threads, tuple(env), pin, load)


# ---------------------------------------------------------------- worker (one process)


def worker(args: argparse.Namespace) -> None:
    """Set threads up, build, warm up, say ``ready``; then train ``--seconds`` per stdin line."""
    setting = parse_setting(args.worker)
    if setting.pin:
        cores = sorted(os.sched_getaffinity(0))
        os.sched_setaffinity(0, {cores[args.slot % len(cores)]})
    if setting.selfattn_default:
        import selfattn  # noqa: F401  (as the CLI starts: it prepares OpenMP, then loads torch)
    import torch
    from torch import nn

    from selfattn import runtime
    from selfattn.models import Encoder, StackConfig

    if setting.selfattn_default:
        runtime.configure_threads(None)
    elif setting.load_aware:
        torch.set_num_threads(runtime.default_threads())
    elif setting.threads is not None:
        torch.set_num_threads(setting.threads)

    embed_dim, num_heads, num_layers, ffn_dim, batch, length = MODELS[args.model]
    torch.manual_seed(args.slot)
    encoder = Encoder(StackConfig(embed_dim, num_heads, ffn_dim, num_layers=num_layers))
    head = nn.Linear(embed_dim, 2)
    parameters = [*encoder.parameters(), *head.parameters()]
    optimizer = torch.optim.AdamW(parameters, lr=1e-4)
    x = torch.randn(batch, length, embed_dim)
    labels = torch.randint(2, (batch, length))

    def step() -> None:
        logits = head(encoder(x).last_hidden_state)
        loss = nn.functional.cross_entropy(logits.flatten(0, 1), labels.flatten())
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()

    for _ in range(3):  # allocator, kernels, AdamW state
        step()
    print("ready", flush=True)
    for _ in sys.stdin:  # one timed window per line, until stdin closes
        steps, start, cpu_start = 0, time.perf_counter(), time.process_time()
        deadline = start + args.seconds
        while time.perf_counter() < deadline or steps == 0:
            step()
            steps += 1
        result = {
            "steps_per_s": steps / (time.perf_counter() - start),
            "cpu_seconds": time.process_time() - cpu_start,
            "threads": torch.get_num_threads(),
        }
        print(json.dumps(result), flush=True)


# ---------------------------------------------------------------- parent


def start_workers(setting: Setting, count: int, args: argparse.Namespace) -> list[Popen[str]]:
    """``count`` worker processes of ``setting``, each built and warm, waiting for ``go``."""
    env = {k: v for k, v in os.environ.items() if k not in THREAD_VARIABLES}
    env.update(setting.env)
    command = [sys.executable, __file__, "--worker", setting.name, "--model", args.model]
    command += ["--seconds", str(args.seconds)]
    workers = [
        Popen([*command, "--slot", str(slot)], stdin=PIPE, stdout=PIPE, env=env, text=True)
        for slot in range(count)
    ]
    for process in workers:
        if process.stdout is None or process.stdout.readline().strip() != "ready":
            raise RuntimeError(f"worker {setting.name!r} failed before starting")
    return workers


def time_together(workers: list[Popen[str]]) -> tuple[list[dict], float]:
    """Release ``workers`` at once for one timed window: each one's result, and the cores
    other processes kept busy meanwhile."""
    busy_before, wall_before = machine_busy_seconds(), time.perf_counter()
    for process in workers:
        assert process.stdin is not None
        process.stdin.write("go\n")
        process.stdin.flush()
    results = []
    for process in workers:
        assert process.stdout is not None
        results.append(json.loads(process.stdout.readline()))
    own = sum(result["cpu_seconds"] for result in results)
    foreign = (machine_busy_seconds() - busy_before - own) / (time.perf_counter() - wall_before)
    return results, max(0.0, foreign)


def run_together(
    setting: Setting, count: int, args: argparse.Namespace
) -> tuple[list[dict], float]:
    """Start ``count`` fresh workers of ``setting`` and time them together once."""
    workers = start_workers(setting, count, args)
    try:
        return time_together(workers)
    finally:
        for process in workers:
            assert process.stdin is not None
            process.stdin.close()
            if process.wait() != 0:
                raise RuntimeError(f"worker {setting.name!r} exited with {process.returncode}")


def run_beside_busy(setting: Setting, args: argparse.Namespace) -> dict:
    """One worker of ``setting`` beside a pure-Python busy loop that was there first."""
    busy = Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.5)
        (result,), _ = run_together(setting, 1, args)
    finally:
        busy.terminate()
        busy.wait()
    return result


def machine_busy_seconds() -> float:
    """Non-idle CPU seconds of the whole machine since boot (``/proc/stat``; NaN elsewhere).

    The same as :func:`selfattn.runtime.machine_busy_seconds`, kept here because importing
    selfattn at the top would set OpenMP's spin count in every worker, ``old`` included."""
    try:
        with open("/proc/stat") as f:
            fields = [int(v) for v in f.readline().split()[1:]]
    except OSError:
        return float("nan")
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if args.worker:
        worker(args)
        return
    settings = [parse_setting(text) for text in dict.fromkeys(["old", *args.settings])]
    embed_dim, num_heads, num_layers, ffn_dim, batch, length = MODELS[args.model]
    print(
        f"model {args.model}: E={embed_dim} H={num_heads} layers={num_layers} FFN={ffn_dim} "
        f"B={batch} L={length}, forward+backward+AdamW; {len(os.sched_getaffinity(0))} CPUs; "
        f"{args.seconds:g} s per trial, {args.repeats} rounds",
        flush=True,
    )
    rows = {setting.name: Row() for setting in settings}
    for round_index in range(args.repeats):
        for setting in settings if round_index % 2 == 0 else settings[::-1]:
            measure_round(setting, rows[setting.name], args)
            print(f"  round {round_index + 1} {rows[setting.name].last_line}", file=sys.stderr)
    print_table(rows, args.alone_only)


def measure_round(setting: Setting, row: Row, args: argparse.Namespace) -> None:
    """Alone, beside a busy core, and two at once (unless ``--alone-only``), into ``row``."""
    (one,), foreign = run_together(setting, 1, args)
    row.alone.append(one["steps_per_s"])
    row.foreign.append(foreign)
    row.threads.add(one["threads"])
    row.last_line = f"{setting.name:<26} alone {one['steps_per_s']:6.1f}"
    if args.alone_only:
        return
    busy = run_beside_busy(setting, args)
    row.busy.append(busy["steps_per_s"])
    two, foreign = run_together(setting, 2, args)
    each = [result["steps_per_s"] for result in two]
    row.each.extend(each)
    row.ratio.extend(rate / one["steps_per_s"] for rate in each)
    row.foreign.append(foreign)
    row.threads |= {busy["threads"], *(result["threads"] for result in two)}
    row.last_line += (
        f"  beside a busy core {busy['steps_per_s']:6.1f}"
        f"  two at once {each[0]:6.1f} {each[1]:6.1f} steps/s (others: {foreign:.1f} cores)"
    )


@dataclass
class Row:
    """One setting's measurements over every round."""

    alone: list[float] = field(default_factory=list)
    each: list[float] = field(default_factory=list)  # each of two runs at once
    ratio: list[float] = field(default_factory=list)  # each of two ÷ alone, same round
    busy: list[float] = field(default_factory=list)  # beside a busy loop
    foreign: list[float] = field(default_factory=list)  # cores busy with other work
    threads: set[int] = field(default_factory=set)
    last_line: str = ""


def print_table(rows: dict[str, Row], alone_only: bool) -> None:
    """Medians (and the ratio's spread) per setting; ``÷ old``: alone speed ÷ ``old``'s."""
    old = rows["old"]
    header = f"{'setting':<26} {'threads':>7} {'alone':>6} {'÷ old':>6}"
    if not alone_only:
        header += f" {'busy':>6} {'two':>6} {'two ÷ alone (min–max)':>22}"
    header += f" {'others':>6}"
    print(header)
    print("-" * len(header))
    median = statistics.median
    for name, row in rows.items():
        threads = ",".join(map(str, sorted(row.threads)))
        line = f"{name:<26} {threads:>7} {median(row.alone):>6.1f}"
        line += f" {median(row.alone) / median(old.alone):>6.2f}"
        if not alone_only:
            spread = f"({min(row.ratio):.2f}–{max(row.ratio):.2f})"
            line += f" {median(row.busy):>6.1f} {median(row.each):>6.1f}"
            line += f" {median(row.ratio):>8.2f} {spread:>13}"
        print(f"{line} {median(row.foreign):>6.2f}")
    print(
        "steps/s, medians: alone; busy: alone beside a pure-Python busy loop; two: each of "
        "two runs at once.\nothers: cores kept busy by other processes during the alone "
        "and two trials (median); alone is only alone when that is near 0."
    )


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--settings",
        nargs="+",
        default=["old", "default"],
        help="settings to compare (default: old default); old is always measured",
    )
    parser.add_argument("--model", choices=sorted(MODELS), default="small")
    parser.add_argument("--seconds", type=float, default=4.0, help="timed seconds per trial")
    parser.add_argument("--repeats", type=int, default=3, help="interleaved rounds")
    parser.add_argument("--alone-only", action="store_true", help="skip the two-at-once trials")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--slot", type=int, default=0, help=argparse.SUPPRESS)
    return parser.parse_args(argv)


if __name__ == "__main__":
    main()
