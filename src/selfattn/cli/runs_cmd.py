"""``selfattn runs [DIR]``: the runs under a folder in one table, their learning curves
(``--plot``), or JSON (``--json``); :mod:`selfattn.runs`."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from selfattn.runs.plot import plot_curves
from selfattn.runs.table import half_written_lines, read_runs, runs_json, runs_table


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``selfattn runs``."""
    parser.add_argument(
        "folder",
        nargs="?",
        type=Path,
        default=Path("runs"),
        metavar="DIR",
        help="a folder of run folders, searched at any depth (default: runs)",
    )
    parser.add_argument("--json", action="store_true", help="print every run as JSON instead")
    parser.add_argument(
        "--plot", action="store_true", help="also draw the learning curves (see -o)"
    )
    parser.add_argument(
        "-o",
        "--output",
        type=Path,
        default=Path("curves.png"),
        help="the image --plot writes (default: curves.png)",
    )


def run(args: argparse.Namespace) -> int:
    """Print the table (or JSON); a half-written run is one line on stderr each, and the
    exit status is then 2 (the other runs are still listed)."""
    records = read_runs(args.folder)
    if not records:
        raise ValueError(f"no runs under {args.folder} (no folder holds a config.toml)")
    if args.json:
        print(json.dumps(runs_json(records), indent=1))
    elif any(record.problem is None for record in records):
        print(runs_table(records))
    if args.plot:
        written = plot_curves(records, args.output)
        print(f"wrote {written}", file=sys.stderr)
    problems = half_written_lines(records)
    for line in problems:
        print(f"selfattn runs: {line}", file=sys.stderr)
    return 2 if problems else 0
