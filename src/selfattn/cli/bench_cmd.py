"""``selfattn bench attention``: time, memory and error of every attention variant."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from pathlib import Path

import torch

from selfattn import runtime
from selfattn.bench.attention import (
    LENGTHS,
    bench_attention,
    format_table,
    plot_rows,
    rows_by_variant,
)
from selfattn.kernels import KERNELS


def _ints(text: str) -> list[int]:
    try:
        values = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected comma-separated integers, got {text!r}"
        ) from None
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"expected positive integers, got {text!r}")
    return values


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``selfattn bench`` sub-subcommands."""
    actions = parser.add_subparsers(dest="action", required=True)
    bench = actions.add_parser(
        "attention",
        help="every attention variant vs dense SDPA: time, peak memory, error, over L",
    )
    bench.add_argument(
        "--variants",
        default=",".join(KERNELS),
        help=f"comma-separated, from {', '.join(KERNELS)} (default: all; dense always runs)",
    )
    bench.add_argument(
        "--lengths",
        type=_ints,
        default=list(LENGTHS),
        help="comma-separated sequence lengths (default: 1024,...,16384)",
    )
    bench.add_argument("--batch", type=int, default=1)
    bench.add_argument("--heads", type=int, default=4)
    bench.add_argument("--head-dim", type=int, default=64)
    bench.add_argument("--window", type=int, default=256, help="w of the window variant")
    bench.add_argument("--repeats", type=int, default=3, help="timed calls per entry (median)")
    runtime.add_threads_argument(bench)  # applied by selfattn.cli.main before run()
    bench.add_argument("--device", default="auto", help="cpu, cuda or auto")
    bench.add_argument("--plot", type=Path, help="also draw time and memory against L here (PNG)")
    bench.add_argument("--json", type=Path, help="also write the rows here")


def run(args: argparse.Namespace) -> int:
    """Run the benchmark and print its table."""
    variants = [name.strip() for name in args.variants.split(",") if name.strip()]
    device = args.device
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    print(
        f"attention variants vs dense scaled_dot_product_attention on {device}: B={args.batch}, "
        f"H={args.heads}, D={args.head_dim}, fp32, window w={args.window}; ratios = "
        "variant / dense at the same L",
        flush=True,
    )
    rows = bench_attention(
        variants,
        args.lengths,
        batch=args.batch,
        heads=args.heads,
        head_dim=args.head_dim,
        window=args.window,
        repeats=args.repeats,
        device=device,
        progress=lambda step: print(f"  measuring {step} ...", file=sys.stderr, flush=True),
    )
    print(format_table(rows))
    if args.plot:
        print(f"plot: {plot_rows(rows, args.plot)}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps([asdict(row) for row in rows], indent=2) + "\n")
        print(f"rows: {args.json}")
    print(json.dumps(rows_by_variant(rows)))  # last: the numbers, for a record of this run
    return 0
