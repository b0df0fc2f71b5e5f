"""``selfattn average RUN --last K -o DIR``: the mean of the weights of a run's last K epoch
checkpoints, as a checkpoint folder for ``eval``, ``predict`` and ``export`` (a thin layer
over :mod:`selfattn.train.average`)."""

from __future__ import annotations

import argparse
from pathlib import Path

DESCRIPTION = """\
Average the weights of the last K epoch checkpoints of a run (fairseq-style checkpoint
averaging). The run must have kept them: train it with train.keep_epochs >= K, which keeps
RUN/epoch-E/ for each of its last epochs. Integer and boolean buffers come from the newest
checkpoint, as do the configuration and vocabularies. The result is for inference: it holds
no optimizer state and cannot be resumed."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``selfattn average``."""
    parser.description = DESCRIPTION
    parser.add_argument("run_dir", type=Path, metavar="RUN", help="a run folder")
    parser.add_argument(
        "--last",
        required=True,
        type=int,
        metavar="K",
        help="average the checkpoints of the last K epochs",
    )
    parser.add_argument(
        "-o",
        "--output",
        required=True,
        type=Path,
        metavar="DIR",
        help="the checkpoint folder to write",
    )
    parser.add_argument(
        "--overwrite", action="store_true", help="replace DIR if it is a checkpoint folder"
    )


def run(args: argparse.Namespace) -> int:
    """Average, then print what was averaged and where it went."""
    from selfattn.train.average import write_average

    averaged = write_average(args.run_dir, args.last, args.output, overwrite=args.overwrite)
    names = ", ".join(path.name for path in averaged)
    print(f"averaged {names} of {args.run_dir} into {args.output}")
    return 0
