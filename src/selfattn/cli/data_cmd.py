"""``selfattn data list`` and ``selfattn data fetch NAME``.

Both cover the dataset recipes and the pretrained weights (:data:`PRETRAINED`); a
checkpoint's row says ``pretrained`` in the task column and ``weights`` in the input
column.
"""

from __future__ import annotations

import argparse
import re

from selfattn.data import RECIPES
from selfattn.pretrained.weights import PRETRAINED


def _natural(name: str) -> list[int | str]:
    """Sort key: convex-hull-5 before convex-hull-10."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name)]


def _names() -> list[str]:
    return sorted([*RECIPES, *PRETRAINED], key=_natural)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``selfattn data`` sub-subcommands."""
    actions = parser.add_subparsers(dest="action", required=True)
    actions.add_parser(
        "list", help="the dataset recipes and pretrained weights: name, task, size, fetched or not"
    )
    fetch = actions.add_parser(
        "fetch", help="download and verify a recipe's data or pretrained weights into the cache"
    )
    fetch.add_argument("names", nargs="+", metavar="NAME", help=f"one of {_names()}")


def run(args: argparse.Namespace) -> int:
    """Carry out ``data list`` or ``data fetch``."""
    if args.action == "list":
        _list()
        return 0
    for name in args.names:
        if name not in RECIPES and name not in PRETRAINED:
            raise ValueError(
                f"unknown dataset or pretrained weights {name!r}; choose one of {_names()}"
            )
    for name in args.names:
        if name in PRETRAINED:
            weights = PRETRAINED[name]
            print(f"{name}: pretrained weights in {weights.fetch()} ({weights.description})")
            continue
        splits = RECIPES[name].load()
        print(
            f"{name}: {len(splits.train)} train / {len(splits.dev)} dev / "
            f"{len(splits.test)} test ({splits.task} task, {splits.input} input)"
        )
    return 0


def _row(name: str) -> tuple[str, str, float, bool, str]:
    """Task column, input column, download size (MB), whether fetched and origin, for a
    recipe or weights (whose origin names every archive and the licence)."""
    if name in PRETRAINED:
        weights = PRETRAINED[name]
        origin = f"{weights.origin()}, licence {weights.licence}"
        return "pretrained", "weights", weights.download_mb, weights.is_fetched(), origin
    recipe = RECIPES[name]
    source = recipe.source
    return recipe.task, recipe.input, source.download_mb, recipe.is_fetched(), source.origin()


def _list() -> None:
    width = max(len(name) for name in _names())
    print(f"{'name':<{width}} {'task':<10} {'input':<8} {'download':>9}  {'fetched':<8} source")
    for name in _names():
        task, kind, size, fetched, origin = _row(name)
        # Generated data downloads nothing: "-" rather than a misleading "0.0MB".
        download = f"{size:>7.1f}MB" if size else f"{'-':>9}"
        print(
            f"{name:<{width}} {task:<10} {kind:<8} {download}  "
            f"{'yes' if fetched else 'no':<8} {origin}"
        )
