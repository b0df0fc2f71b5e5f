"""``selfattn config [ARCHITECTURE]``: the ``[model]`` fields an architecture reads, with
their defaults and one line each, or every architecture with what it is (a thin layer over
:data:`selfattn.models.architectures.ARCHITECTURES`)."""

from __future__ import annotations

import argparse
import dataclasses

from selfattn.models.option_groups import describe, toml_value

DESCRIPTION = """\
Without ARCHITECTURE: every model.architecture, one line each. With one: the [model]
fields it reads, each with its default and what it does; any other field in a config's
[model] table is refused (or dropped, when it holds its default)."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``selfattn config``."""
    parser.description = DESCRIPTION
    parser.add_argument(
        "architecture", nargs="?", metavar="ARCHITECTURE", help="e.g. transformer, bigru, rnn"
    )


def run(args: argparse.Namespace) -> int:
    """Print the table (or the list of architectures)."""
    print(architecture_table(args.architecture))
    return 0


def architecture_table(name: str | None) -> str:
    """The fields architecture ``name`` reads as aligned lines (every architecture when
    ``name`` is ``None``).

    Raises:
        ValueError: no such architecture (one line listing them).
    """
    from selfattn.models.architectures import ARCHITECTURES
    from selfattn.models.registry import architecture_named

    if name is None:
        width = max(map(len, ARCHITECTURES))
        rows = [f"{entry.name:<{width}}  {entry.summary}" for entry in ARCHITECTURES.values()]
        return "\n".join([*rows, "", "selfattn config ARCHITECTURE: the fields it reads"])
    entry = architecture_named(name)
    fields = [f for f in dataclasses.fields(entry.options) if f.name != "architecture"]
    cells = [
        (f"{f.name} = {toml_value(f.default)}", describe(entry.options, f.name)) for f in fields
    ]
    width = max(len(left) for left, _ in cells)
    lines = [
        f'[model]  architecture = "{entry.name}": {entry.summary}',
        f"gives: {', '.join(sorted(entry.produces))}",
    ]
    if entry.losses:
        lines.append(f"adds to the loss: {'; '.join(entry.losses)}")
    lines += ["", *(f"{left:<{width}}  {right}" for left, right in cells)]
    return "\n".join(lines)
