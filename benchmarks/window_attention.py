"""Truncated attention: the window kernel against dense SDPA, ours ÷ reference.

At each length L (default 16384; w = 256, B = 1, H = 4, D = 64, fp32) the forward pass
(under ``torch.no_grad``) and forward+backward of :class:`selfattn.kernels.WindowKernel`
are timed and their peak memory measured against

* ``band``: ``F.scaled_dot_product_attention`` under the kernel's ``reference_mask`` — the
  same result (checked), computed over the whole ``L × L`` matrix;
* ``full``: ``F.scaled_dot_product_attention`` without a mask — full attention, the cost
  truncation avoids.

A second table shows the window kernel's forward+backward peak over L = 1K … 16K growing in
proportion to L (peak ÷ L stays flat), next to the band-masked SDPA's, which grows as L².

Method: times are medians over ``--repeats`` calls after one warm-up call, ours and the
reference interleaved (alternating order) in one process on the same inputs; rows timed
while other processes kept the CPU busy are marked ``noisy``. Peak memory is
:func:`selfattn.bench.measure_memory` of one call (on CPU: the profiler's record of every
allocation through PyTorch's allocator, the highest total above the start; on CUDA:
``max_memory_allocated``).

The last line is every number once more as one JSON object (``16384.fwd-bwd.band.time_ratio``,
``growth.1024.ours_mib``, …, and the 1-minute load average), which
``tests/docs/records.py record`` reads.

Usage::

    OMP_NUM_THREADS=1 python benchmarks/window_attention.py             # ~5 min at 1 thread
    python benchmarks/window_attention.py --lengths 4096 --growth 1024 4096 --repeats 1
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor

import selfattn
from selfattn.bench.memory import measure_memory
from selfattn.kernels.window import WindowKernel
from selfattn.runtime import machine_busy_seconds

MiB = 1 << 20
FOREIGN_LOAD_NOTE = 0.3  # cores used by other processes while timing that earn a note

Attend = Callable[[Tensor, Tensor, Tensor], Tensor]


def attends(kernel: WindowKernel, length: int, device: torch.device) -> dict[str, Attend]:
    """The three ways to attend, by name."""
    band = kernel.reference_mask(length, length, device)
    return {
        "ours": lambda q, k, v: kernel(q, k, v)[0],
        "band": lambda q, k, v: F.scaled_dot_product_attention(q, k, v, attn_mask=band),
        "full": lambda q, k, v: F.scaled_dot_product_attention(q, k, v),
    }


def make_call(
    attend: Attend, tensors: tuple[Tensor, ...], grad_out: Tensor, backward: bool
) -> Callable[[], None]:
    def call() -> None:
        if backward:
            for t in tensors:
                t.grad = None
            attend(*tensors).backward(grad_out)
        else:
            with torch.no_grad():
                attend(*tensors)
        if grad_out.is_cuda:
            torch.cuda.synchronize()

    return call


def inputs(args: argparse.Namespace, length: int) -> tuple[tuple[Tensor, ...], Tensor]:
    gen = torch.Generator().manual_seed(0)
    shape = (args.batch, args.heads, length, args.head_dim)
    tensors = tuple(
        torch.randn(*shape, generator=gen).to(args.device).requires_grad_() for _ in range(3)
    )
    return tensors, torch.randn(*shape, generator=gen).to(args.device)


def time_interleaved(calls: dict[str, Callable[[], None]], repeats: int) -> dict[str, float]:
    """Median seconds per call of each, after one warm-up call each, alternating order."""
    for call in calls.values():
        call()
    samples: dict[str, list[float]] = {name: [] for name in calls}
    order = list(calls)
    for i in range(repeats):
        for name in order if i % 2 == 0 else order[::-1]:
            start = time.perf_counter()
            calls[name]()
            samples[name].append(time.perf_counter() - start)
    return {name: statistics.median(s) for name, s in samples.items()}


def _own_cpu_seconds() -> float:
    t = os.times()
    return t.user + t.system


def check_same(kernel: WindowKernel, length: int, args: argparse.Namespace) -> float:
    """Largest difference between ours and band-masked SDPA on the benchmark's inputs."""
    (q, k, v), _ = inputs(args, length)
    with torch.no_grad():
        ours, _ = kernel(q, k, v)
        band = attends(kernel, length, q.device)["band"](q, k, v)
    return float((ours - band).abs().max())


def comparison(args: argparse.Namespace, kernel: WindowKernel) -> dict[str, float]:
    print(
        f"\n== window kernel ÷ dense SDPA: w={args.window}, B={args.batch}, H={args.heads}, "
        f"D={args.head_dim} =="
    )
    print(
        f"{'L':>6} {'mode':<8}{'ref':<6}{'ours ms':>10}{'ref ms':>10}{'time ×':>8}  "
        f"{'ours MiB':>10}{'ref MiB':>10}{'mem ×':>8}  note"
    )
    values: dict[str, float] = {}
    for length in args.lengths:
        values[f"{length}.max_diff"] = check_same(kernel, length, args)
        note_same = f"max |ours − band| = {values[f'{length}.max_diff']:.1e}"
        print(f"{length:>6} {note_same}", flush=True)
        for backward in (False, True):
            tensors, grad_out = inputs(args, length)
            calls = {
                name: make_call(attend, tensors, grad_out, backward)
                for name, attend in attends(kernel, length, grad_out.device).items()
            }
            busy, own, wall = machine_busy_seconds(), _own_cpu_seconds(), time.time()
            seconds = time_interleaved(calls, args.repeats)
            foreign = (machine_busy_seconds() - busy - (_own_cpu_seconds() - own)) / (
                time.time() - wall
            )
            note = (
                f"noisy: other processes used {foreign:.1f} cores"
                if foreign > FOREIGN_LOAD_NOTE and args.device == "cpu"  # the GPU is not shared
                else ""
            )
            peaks = {name: measure_memory(call, args.device).peak for name, call in calls.items()}
            mode = "fwd+bwd" if backward else "fwd"
            for ref in ("band", "full"):
                print(
                    f"{length:>6} {mode:<8}{ref:<6}"
                    f"{seconds['ours'] * 1e3:>10.1f}{seconds[ref] * 1e3:>10.1f}"
                    f"{seconds['ours'] / seconds[ref]:>8.3f}  "
                    f"{peaks['ours'] / MiB:>10.1f}{peaks[ref] / MiB:>10.1f}"
                    f"{peaks['ours'] / max(peaks[ref], 1):>8.3f}  {note}".rstrip(),
                    flush=True,
                )
                key = f"{length}.{'fwd-bwd' if backward else 'fwd'}.{ref}"
                values |= {
                    f"{key}.ours_ms": seconds["ours"] * 1e3,
                    f"{key}.ref_ms": seconds[ref] * 1e3,
                    f"{key}.time_ratio": seconds["ours"] / seconds[ref],
                    f"{key}.ours_mib": peaks["ours"] / MiB,
                    f"{key}.ref_mib": peaks[ref] / MiB,
                    f"{key}.memory_ratio": peaks["ours"] / max(peaks[ref], 1),
                }
    return values


def growth(args: argparse.Namespace, kernel: WindowKernel) -> dict[str, float]:
    print(f"\n== forward+backward peak memory against L (w={args.window}) ==")
    print(f"{'L':>6}{'ours MiB':>10}{'KiB / pos':>11}{'band MiB':>10}{'KiB / pos':>11}")
    values = {}
    for length in args.growth:
        tensors, grad_out = inputs(args, length)
        row = f"{length:>6}"
        for name in ("ours", "band"):
            attend = attends(kernel, length, grad_out.device)[name]
            peak = measure_memory(make_call(attend, tensors, grad_out, True), args.device).peak
            row += f"{peak / MiB:>10.1f}{peak / 1024 / length:>11.1f}"
            values[f"growth.{length}.{name}_mib"] = peak / MiB
            values[f"growth.{length}.{name}_kib_per_position"] = peak / 1024 / length
        print(row, flush=True)
    return values


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--lengths", type=int, nargs="+", default=[16384])
    p.add_argument("--growth", type=int, nargs="*", default=[1024, 2048, 4096, 8192, 16384])
    p.add_argument("--window", type=int, default=256)
    p.add_argument("--block-size", type=int, default=None, help="default: the kernel's")
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--head-dim", type=int, default=64)
    p.add_argument("--repeats", type=int, default=3, help="timed calls per row (median)")
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    args = p.parse_args(argv)
    if args.device == "cuda" and not torch.cuda.is_available():
        p.error("--device cuda: no CUDA device available")
    if args.repeats < 1:
        p.error("--repeats must be >= 1")
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    kernel = WindowKernel(args.window, block_size=args.block_size)
    print(
        f"selfattn {selfattn.__version__}, torch {torch.__version__}, {args.device}, "
        f"{torch.get_num_threads()} threads, fp32; block size "
        f"{args.block_size or 'default (max(w // 2, 64))'}"
    )
    print(
        "ratios are ours ÷ reference (< 1: ours faster / smaller); band = SDPA under the "
        "band mask (same result), full = SDPA without a mask; memory = measure_memory peak"
    )
    values = comparison(args, kernel)
    if args.growth:
        values |= growth(args, kernel)
    values["load"] = os.getloadavg()[0]  # the times are absolute: how busy the machine was
    print(json.dumps(values))  # the numbers, for tests/docs/records.py record


if __name__ == "__main__":
    main()
