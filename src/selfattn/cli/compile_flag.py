"""``--compile`` of ``selfattn eval`` and ``predict``: the model compiled by
``torch.compile`` as ``train.compile`` trains it (:mod:`selfattn.train.compile`)."""

from __future__ import annotations

import argparse
import sys

from selfattn.tasks import Predictor
from selfattn.train.compile import CompileWatch, compile_for_inference


def add_compile_argument(parser: argparse.ArgumentParser) -> None:
    """``--compile`` of ``eval`` and ``predict``."""
    parser.add_argument(
        "--compile",
        action="store_true",
        help="run the model compiled by torch.compile, as train.compile trains it (the "
        "first inputs wait for the compiler; stderr says how long)",
    )


def compiled(predictor: Predictor, args: argparse.Namespace) -> CompileWatch | None:
    """``--compile``: ``predictor``'s model compiled in place, and the watch of what that
    costs; else ``None``.

    Raises:
        ValueError: an architecture that does not compile.
    """
    if not args.compile:
        return None
    return compile_for_inference(predictor.model, predictor.config.model.architecture)


def report_compiled(watch: CompileWatch | None, command: str) -> None:
    """The compile time on stderr, once the inputs have run."""
    if watch is not None:
        print(f"selfattn {command}: {watch.line()}", file=sys.stderr)
