"""Config files and command-line runs for the tests.

``write_config`` writes a run configuration from Python values, so that a test states the
fields it needs (``QUICK_TRAIN`` and ``TINY_MODEL`` hold the ones most tests share)
instead of a page of TOML; ``one_line_error`` runs a command that must be refused in one
line; ``train_and_eval`` trains a config and evaluates its run, ``train_and_resume``
trains it and resumes it for more epochs.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from selfattn.cli.main import main

#: A ``[table]`` of ``write_config``: key → value (a ``None`` value leaves its key out),
#: or TOML lines written as they stand, or ``None`` for an empty table.
Section = Mapping[str, object] | str | None

#: ``[train]`` of a tiny test run: a few warm-up steps, seeded, on one CPU thread.
QUICK_TRAIN: dict[str, object] = {
    "lr": 3e-3,
    "warmup_steps": 2,
    "seed": 0,
    "device": "cpu",
    "threads": 1,
}
#: ``[model]`` of a tiny test run: a one-layer Transformer of width 16, no dropout.
TINY_MODEL: dict[str, object] = {
    "embed_dim": 16,
    "num_heads": 2,
    "num_layers": 1,
    "ffn_dim": 32,
    "dropout": 0.0,
}


def toml_value(value: object) -> str:
    """``value`` as a TOML value: a string or a path quoted, a boolean in lower case, a
    list as an array."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str | Path):
        # A JSON string is a TOML basic string (the same escapes).
        return json.dumps(str(value))
    if isinstance(value, list | tuple):
        return "[" + ", ".join(toml_value(item) for item in value) + "]"
    raise TypeError(f"no TOML value for {value!r}")


def toml_table(values: Mapping[str, object]) -> str:
    """``key = value`` lines, one for each value that is not ``None``."""
    return "".join(f"{key} = {toml_value(v)}\n" for key, v in values.items() if v is not None)


def write_config(path: Path, *, run_dir: Path | None = None, **sections: Section) -> Path:
    """Write ``path``: ``run_dir`` at the top (when given), then a ``[name]`` table for each
    of ``sections``, in their order. Returns ``path``."""
    parts = [] if run_dir is None else [toml_table({"run_dir": run_dir})]
    for name, section in sections.items():
        body = section if isinstance(section, str) else toml_table(section or {})
        parts.append(f"[{name}]\n{body.rstrip()}\n" if body.strip() else f"[{name}]\n")
    path.write_text("\n".join(parts), encoding="utf-8")
    return path


def set_flags(*settings: str) -> list[str]:
    """``--set`` before each of ``settings`` (``"train.epochs=2"``)."""
    return [part for setting in settings for part in ("--set", setting)]


def one_line_error(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    """The error of ``selfattn ARGV``, which must exit with status 2 and say why in one
    line, without a traceback."""
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err and "\n" not in err and "Traceback" not in err, err
    return err


def epochs_logged(run_dir: Path) -> list[int]:
    """The epoch of each line of ``run_dir``'s ``metrics.jsonl``, in order."""
    lines = (run_dir / "metrics.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line)["epoch"] for line in lines]


def train_and_resume(config: Path, run_dir: Path, *, first: int, last: int) -> None:
    """Train ``config`` into ``run_dir`` for ``first`` epochs, then resume it to ``last``:
    the run logs each epoch once, in order."""
    assert main(["train", str(config), "--no-progress", "--set", f"train.epochs={first}"]) == 0
    resume = ["--resume", "--set", f"train.epochs={last}"]
    assert main(["train", str(config), "--no-progress", *resume]) == 0
    assert epochs_logged(run_dir) == list(range(1, last + 1))


def train_and_eval(
    config: Path, capsys: pytest.CaptureFixture[str], *, split: str = "test"
) -> dict[str, Any]:
    """Train ``config`` (its run in ``run`` beside it) and return ``eval``'s metrics on
    ``split``."""
    assert main(["train", str(config), "--no-progress"]) == 0
    capsys.readouterr()
    assert main(["eval", str(config.parent / "run"), "--split", split]) == 0
    metrics: dict[str, Any] = json.loads(capsys.readouterr().out)
    return metrics
