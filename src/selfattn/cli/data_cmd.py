"""``selfattn data list`` and ``selfattn data fetch NAME``."""

from __future__ import annotations

import argparse
import re

from selfattn.data import RECIPES


def _natural(name: str) -> list[int | str]:
    """Sort key: convex-hull-5 before convex-hull-10."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name)]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``selfattn data`` sub-subcommands."""
    actions = parser.add_subparsers(dest="action", required=True)
    actions.add_parser("list", help="the dataset recipes: name, task, size, fetched or not")
    fetch = actions.add_parser("fetch", help="download and verify a recipe's data into the cache")
    fetch.add_argument("names", nargs="+", metavar="NAME", help=f"one of {sorted(RECIPES)}")


def run(args: argparse.Namespace) -> int:
    """Carry out ``data list`` or ``data fetch``."""
    if args.action == "list":
        width = max(len(name) for name in RECIPES)
        print(f"{'name':<{width}} {'task':<10} {'input':<8} {'download':>9}  {'fetched':<8} source")
        for name in sorted(RECIPES, key=_natural):
            recipe = RECIPES[name]
            # Generated data downloads nothing: "-" rather than a misleading "0.0MB".
            size = recipe.source.download_mb
            download = f"{size:>7.1f}MB" if size else f"{'-':>9}"
            print(
                f"{name:<{width}} {recipe.task:<10} {recipe.input:<8} {download}  "
                f"{'yes' if recipe.is_fetched() else 'no':<8} {recipe.source.origin()}"
            )
        return 0
    for name in args.names:
        if name not in RECIPES:
            raise ValueError(f"unknown dataset {name!r}; choose one of {sorted(RECIPES)}")
    for name in args.names:
        splits = RECIPES[name].load()
        print(
            f"{name}: {len(splits.train)} train / {len(splits.dev)} dev / "
            f"{len(splits.test)} test ({splits.task} task, {splits.input} input)"
        )
    return 0
