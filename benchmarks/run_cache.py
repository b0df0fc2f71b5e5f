"""One training run of a results script, trained once and read back after: the shared
part of ``attention_options.py`` and ``memn2n_babi.py``."""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from selfattn.config import load_config
from selfattn.tasks import Predictor, run
from selfattn.train.loop import TrainResult


def run_arguments(doc: str, config: str, out: str) -> argparse.ArgumentParser:
    """The parser of a script whose docstring is ``doc`` (its first paragraph describes
    the script), with the options every such script takes: its config and output folder,
    the seed, the threads of every run, ``--set`` overrides and ``--no-progress``."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    parser.add_argument("--config", type=Path, default=Path(config))
    parser.add_argument("--out", type=Path, default=Path(out))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, help="train.threads of every run")
    parser.add_argument("--set", dest="overrides", action="append", default=[])
    parser.add_argument("--no-progress", action="store_true")
    return parser


def trained_row(
    args: argparse.Namespace,
    name: str,
    settings: list[str],
    describe: Callable[[TrainResult, Predictor], dict[str, Any]],
    result_name: str = "result.json",
) -> dict[str, Any]:
    """Train ``args.config`` with ``args.overrides`` and ``settings`` into
    ``args.out / name`` and return ``describe``'s row of the run, with its best epoch,
    epochs and seconds (training and describing); a row saved there before is read
    back instead."""
    out = args.out / name
    saved = out / result_name
    if saved.is_file():
        return dict(json.loads(saved.read_text(encoding="utf-8")))
    overrides = [
        *args.overrides,
        *settings,
        f"train.seed={args.seed}",
        f"run_dir={json.dumps(str(out))}",
    ]
    if args.threads:
        overrides.append(f"train.threads={args.threads}")
    started = time.perf_counter()
    config = load_config(args.config, overrides)
    result, _ = run(config, overwrite=True, progress=not args.no_progress)
    row = describe(result, Predictor(result.run_dir))
    row.update(
        best_epoch=(result.best or {}).get("epoch"),
        epochs=len(result.history),
        seconds=time.perf_counter() - started,
    )
    saved.write_text(json.dumps(row, indent=2) + "\n", encoding="utf-8")
    return row
