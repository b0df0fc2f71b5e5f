"""Compiled training (``train.compile``) against eager and against Hugging Face's
``BertForMaskedLM``, eager and compiled, as whole token models: the models, batches and
step of ``train_throughput.py`` (token ids in, vocabulary logits out, cross-entropy over
the real positions, backward, AdamW; fp32 on the CPU, dropout 0.1, the [model] defaults).

Four sides take turns on the same batches in one process (the order rotates every step):

* **ours**: selfattn's token model, eager;
* **ours compiled**: the same model (same weights) compiled as ``train.compile = true``
  compiles it (:func:`selfattn.train.compile.compile_model`: in place, Inductor, dynamic
  batch size and length);
* **HF** and **HF compiled**: ``BertForMaskedLM`` (``train_throughput.py``'s ``build_hf``),
  eager, and compiled the same way (``Module.compile(backend="inductor", dynamic=True)``
  with ``train.compile``'s Inductor options, :data:`selfattn.train.compile.OPTIONS`).

For each compiled side the table gives its compile time (``torch._dynamo``'s own count of
seconds spent compiling during its warm-up steps, forward and backward) and the
recompilations while timed (0: the timed batches ran the graph the warm-up compiled).
After timing, each compiled side runs one step at each of ``--bucket-lengths`` (batches of
other padded lengths, as the length buckets of a run give): ``recompiled`` counts the
graphs those steps compiled (0: every length ran the one dynamic graph).

The last columns set the useful work against the machine: the useful FLOPs of a step are
6 × (matrix parameters) × (real tokens) for the linear layers (2 forward, 4 backward) plus
12 × E × Σ l² per layer for attention's two products over the real lengths l (forward and
backward), counted on ours' architecture for every side (BERT's extra E × E head
transform is not counted as useful). ``%peak`` is that rate ÷ this CPU's fp32
matrix-product peak, measured in the same run at the same thread count (the best of
``torch.mm`` on square float32 matrices of 1024 to 2048).

Usage::

    python benchmarks/train_compiled.py            # d256 + d512, 32x128, 1 and 2 threads
    python benchmarks/train_compiled.py --sizes d256 --threads 1 --steps 5
    python benchmarks/train_compiled.py --sizes d256 --threads 1 --steps 2 --profile
    python benchmarks/train_compiled.py --quick    # tiny, 8x32, 2 steps, 1 thread
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent))
from selfattn.datatypes import Batch
from selfattn.runtime import machine_busy_seconds
from selfattn.train import compile as compiling
from train_throughput import (  # the sibling script's models and step
    FOREIGN_LOAD_NOTE,
    SIZES,
    Size,
    build_hf,
    build_ours,
    hf_logits,
    make_batches,
    train_step,
)

SIDES = ("ours", "ours compiled", "hf", "hf compiled")
#: ``--clock``: wall time, or this process's CPU time (at one thread a busy machine's other
#: processes then count far less; at N threads it is the work of all N, not the latency).
CLOCKS: dict[str, Callable[[], float]] = {"wall": time.perf_counter, "cpu": time.process_time}


def matmul_peak(clock: Callable[[], float], seconds: float = 1.0) -> float:
    """This CPU's fp32 matrix-product rate at the current thread count, FLOP/s: the best
    of ``torch.mm`` on square matrices of 1024, 1536 and 2048, each timed by ``clock``
    for about ``seconds`` of wall time."""
    best = 0.0
    for n in (1024, 1536, 2048):
        a, b = torch.randn(n, n), torch.randn(n, n)
        torch.mm(a, b)  # warm-up
        ended = time.perf_counter() + seconds
        while time.perf_counter() < ended:
            start = clock()
            torch.mm(a, b)
            best = max(best, 2 * n**3 / max(clock() - start, 1e-9))
    return best


def useful_flops(size: Size, vocab: int, batch: Batch) -> float:
    """FLOPs of one training step's useful work (see the module docstring)."""
    lengths = (~batch.key_padding_mask).sum(dim=1).double()
    tokens = float(lengths.sum())
    e, f = size.embed_dim, size.ffn_dim
    matrix = size.num_layers * (4 * e * e + 2 * e * f) + e * vocab
    attention = size.num_layers * 12 * e * float((lengths**2).sum())
    return 6 * matrix * tokens + attention


def compiled(model: nn.Module, hf: bool) -> nn.Module:
    """``model`` compiled in place: ours as ``train.compile`` does, HF the same way."""
    if hf:
        model.compile(
            backend=compiling.BACKEND, dynamic=compiling.DYNAMIC, options=compiling.options()
        )
    else:
        compiling.compile_model(model, "transformer")
    return model


def measure(args: argparse.Namespace, size: Size, batch: int, length: int) -> dict[str, Any]:
    """Median tokens/s of each side, compile seconds and recompilations of the compiled
    ones, and the useful FLOP/s."""
    torch.manual_seed(0)
    ours = build_ours(size, args.vocab, length, args.dropout)
    ours_c = build_ours(size, args.vocab, length, args.dropout)
    ours_c.load_state_dict(ours.state_dict())
    hf = build_hf(size, args.vocab, length, args.dropout)
    hf_c = build_hf(size, args.vocab, length, args.dropout)
    hf_c.load_state_dict(hf.state_dict())
    models = {"ours": ours, "ours compiled": ours_c, "hf": hf, "hf compiled": hf_c}
    runs: dict[str, Callable[[Batch], torch.Tensor]] = {
        "ours": ours,
        "ours compiled": compiled(ours_c, hf=False),
        "hf": hf_logits(hf),
        "hf compiled": hf_logits(compiled(hf_c, hf=True)),
    }
    steps = {
        side: train_step(runs[side], torch.optim.AdamW(models[side].parameters(), lr=1e-4))
        for side in SIDES
    }
    for model in models.values():
        model.train()
    batches = make_batches(args.steps, batch, length, args.vocab, torch.Generator().manual_seed(1))
    tokens = [int((~b.key_padding_mask).sum()) for b in batches]
    compile_seconds: dict[str, float] = {}
    for side in SIDES:  # warm-up: compiling, allocator, AdamW state
        watch = compiling.CompileWatch.start()
        for b in batches[: args.warmup]:
            steps[side](b)
        compile_seconds[side] = watch.seconds
    rates: dict[str, list[float]] = {side: [] for side in SIDES}
    timed = compiling.CompileWatch.start()
    busy_before, cpu_before, wall_before = machine_busy_seconds(), time.process_time(), time.time()
    flops: list[float] = []
    clock = CLOCKS[args.clock]
    for i, (b, n) in enumerate(zip(batches, tokens, strict=True)):
        flops.append(useful_flops(size, args.vocab, b))
        order = SIDES[i % len(SIDES) :] + SIDES[: i % len(SIDES)]
        for side in order:
            start = clock()
            steps[side](b)
            rates[side].append(n / (clock() - start))
    timed_graphs = timed.graphs
    wall = time.time() - wall_before
    foreign = (machine_busy_seconds() - busy_before - (time.process_time() - cpu_before)) / wall
    bucketed: dict[str, int] = {}
    generator = torch.Generator().manual_seed(2)
    for side in ("ours compiled", "hf compiled"):
        watch = compiling.CompileWatch.start()
        for other in args.bucket_lengths:
            steps[side](make_batches(1, batch, other, args.vocab, generator)[0])
        bucketed[side] = watch.graphs
    if args.profile:  # where one step of each of ours goes, by operator
        for side in ("ours", "ours compiled"):
            with torch.profiler.profile() as profile:
                steps[side](batches[-1])
            table = profile.key_averages().table(sort_by="self_cpu_time_total", row_limit=8)
            print(f"profile of one step, {side}:\n{table}", flush=True)
    flop_per_token = statistics.mean(f / n for f, n in zip(flops, tokens, strict=True))
    return {
        "rates": {side: statistics.median(rates[side]) for side in SIDES},
        "compile": compile_seconds,
        "timed_graphs": timed_graphs,
        "bucketed": bucketed,
        "flop_per_token": flop_per_token,
        "foreign": foreign,
    }


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", nargs="+", choices=sorted(SIZES), default=["d256", "d512"])
    parser.add_argument("--shape", default="32x128", help="BxL (default: %(default)s)")
    parser.add_argument("--vocab", type=int, default=8192)
    parser.add_argument("--dropout", type=float, default=0.1, help="the [model] default")
    parser.add_argument("--steps", type=int, default=7, help="timed steps per side")
    parser.add_argument("--warmup", type=int, default=2, help="untimed steps per side")
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument(
        "--bucket-lengths",
        type=int,
        nargs="*",
        default=[96, 64, 112],
        help="padded lengths of the steps run after timing, to count recompilations",
    )
    parser.add_argument("--clock", choices=sorted(CLOCKS), default="wall")
    parser.add_argument(
        "--static",
        action="store_true",
        help="compile both sides with dynamic=None (the first shape static) instead of "
        "train.compile's dynamic shapes",
    )
    parser.add_argument(
        "--profile",
        action="store_true",
        help="also print torch.profiler's operators of one step of ours eager and compiled",
    )
    parser.add_argument("--quick", action="store_true", help="tiny, 8x32, 2 steps, 1 thread")
    args = parser.parse_args(argv)
    if args.quick:
        args.sizes, args.shape, args.steps, args.warmup = ["tiny"], "8x32", 2, 1
        args.threads, args.bucket_lengths = [1], [24]
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    import transformers

    if args.static:
        compiling.DYNAMIC = None

    batch, length = (int(v) for v in args.shape.lower().split("x"))
    print(
        f"token models: V={args.vocab}, {batch} x {length}, dropout {args.dropout}, fp32 CPU, "
        f"forward+cross-entropy+backward+AdamW, median of {args.steps} steps after "
        f"{args.warmup} warm-up ({args.clock} clock); compiled: torch.compile "
        f"backend={compiling.BACKEND}, dynamic={compiling.DYNAMIC}, options={compiling.OPTIONS}; "
        f"torch {torch.__version__}, "
        f"transformers {transformers.__version__}"
    )
    header = (
        f"{'size':>5} {'thr':>3} {'ours':>6} {'ours c':>7} {'HF':>6} {'HF c':>6} "
        f"{'oursc/HF':>9} {'oursc/ours':>11} {'oursc/HFc':>10} {'HFc/HF':>7} "
        f"{'compile s ours/HF':>18} {'GFLOP/s peak':>13} {'%peak ours/c/HF/HFc':>20}  notes"
    )
    print(header)
    print("-" * len(header))
    values: dict[str, float] = {}
    for threads in args.threads:
        torch.set_num_threads(threads)
        clock = CLOCKS[args.clock]
        peak = matmul_peak(clock)
        for name in args.sizes:
            row = measure(args, SIZES[name], batch, length)
            peak = max(peak, matmul_peak(clock, 0.5))  # the machine may have been busier before
            print_row(name, threads, row, peak)
            values |= row_values(f"{name}-{threads}t", row, peak)
    print(json.dumps(values))  # the numbers, for tests/docs/records.py record


def row_values(prefix: str, row: dict[str, Any], peak: float) -> dict[str, float]:
    """A row's ratios, tokens/s, compile seconds and shares of the peak, by name."""
    r, c = row["rates"], row["compile"]
    found = {
        "compiled-over-hf": r["ours compiled"] / r["hf"],
        "compiled-over-ours": r["ours compiled"] / r["ours"],
        "hf-compiled-over-hf": r["hf compiled"] / r["hf"],
        "compile-seconds-ours": c["ours compiled"],
        "compile-seconds-hf": c["hf compiled"],
        "peak-gflops": peak / 1e9,
        "recompiled-while-timed": row["timed_graphs"],
    }
    for side in SIDES:
        key = side.replace(" ", "-")
        found[f"tokens-per-s-{key}"] = r[side]
        found[f"peak-share-{key}"] = 100 * r[side] * row["flop_per_token"] / peak
    return {f"{prefix}.{key}": round(float(value), 3) for key, value in found.items()}


def print_row(name: str, threads: int, row: dict[str, Any], peak: float) -> None:
    r, c = row["rates"], row["compile"]
    shares = "/".join(f"{100 * r[side] * row['flop_per_token'] / peak:.0f}" for side in SIDES)
    notes = [
        f"recompiled while timed {row['timed_graphs']}, "
        f"at other lengths ours {row['bucketed']['ours compiled']} "
        f"HF {row['bucketed']['hf compiled']}"
    ]
    if row["foreign"] > FOREIGN_LOAD_NOTE:
        notes.append(f"noisy: other processes used {row['foreign']:.1f} cores")
    cells = [
        f"{name:>5}",
        f"{threads:>3}",
        *(f"{r[side]:>{width}.0f}" for side, width in zip(SIDES, (6, 7, 6, 6), strict=True)),
        f"{r['ours compiled'] / r['hf']:>9.2f}",
        f"{r['ours compiled'] / r['ours']:>11.2f}",
        f"{r['ours compiled'] / r['hf compiled']:>10.2f}",
        f"{r['hf compiled'] / r['hf']:>7.2f}",
        f"{c['ours compiled']:>8.1f}/{c['hf compiled']:<9.1f}",
        f"{peak / 1e9:>13.1f}",
        f"{shares:>20}",
    ]
    print(" ".join(cells) + "  " + "; ".join(notes), flush=True)


if __name__ == "__main__":
    main()
