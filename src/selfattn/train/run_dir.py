"""A run's folder: claiming it for a new run, finding what to resume, its metrics file.

run_dir/
  config.toml      the run's configuration, written when it starts
  metrics.jsonl    one JSON line per finished epoch
  last/            the latest checkpoint (epoch ends, within epochs, on Ctrl-C)
  best/            the best epoch's checkpoint
  epoch-E/         the weights at the end of epoch E, for the last train.keep_epochs epochs
                   (what ``selfattn average`` averages)
"""

from __future__ import annotations

import json
import os
import re
import shutil
import warnings
from pathlib import Path
from typing import Any

from selfattn.config import Config, config_to_dict
from selfattn.models.spec import TaskSpec
from selfattn.train.checkpoint import MANIFEST, write_atomic

METRICS_FILE = "metrics.jsonl"
#: Settings that may change on resuming without changing the run.
HARMLESS_CHANGES = (
    "train.checkpoint_every",
    "train.checkpoint_activations",
    "train.keep_epochs",
    "train.distributed",
    "train.distributed_timeout",
    "train.nan_policy",  # changes nothing until a loss is not finite
    "train.tensorboard",  # what is logged beside metrics.jsonl
    "train.tensorboard_images",
    "train.compile",  # the same model and checkpoints, run compiled or eager
)
_EPOCH_FOLDER = re.compile(r"^epoch-(\d+)$")


def make_run_dir(run_dir: Path) -> None:
    """Create ``run_dir`` (and its parents) if needed, and check that it can be written.

    Raises:
        ValueError: one line naming the path: ``run_dir`` or a folder above it is a file,
            or it cannot be created or written (permissions, a read-only filesystem).
    """
    blocker = next((p for p in (run_dir, *run_dir.parents) if p.exists()), None)
    if blocker is not None and not blocker.is_dir():
        raise ValueError(
            f"run_dir {run_dir}: {blocker} is a file, not a folder; choose another run_dir"
        )
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise ValueError(
            f"run_dir {run_dir}: cannot create it ({error.filename}: {error.strerror})"
        ) from None
    if not os.access(run_dir, os.W_OK | os.X_OK):
        raise ValueError(
            f"run_dir {run_dir}: cannot write into it ({run_dir}: Permission denied); "
            "choose another run_dir"
        )


def claim_run_dir(run_dir: Path, overwrite: bool) -> None:
    """Refuse to start over a previous run unless told to; then clear its metrics."""
    metrics_path = run_dir / METRICS_FILE
    taken = (run_dir / "last").exists() or metrics_path.exists()
    if taken and not overwrite:
        raise ValueError(
            f"{run_dir} already holds a run; resume it or choose another run_dir (or overwrite it)"
        )
    metrics_path.unlink(missing_ok=True)
    prune_epoch_checkpoints(run_dir, 0, 0)  # a previous run's: never averaged with this one's


def epoch_checkpoint(run_dir: Path, epoch: int) -> Path:
    """The folder of epoch ``epoch``'s checkpoint, ``run_dir/epoch-E``."""
    return run_dir / f"epoch-{epoch}"


def epoch_checkpoints(run_dir: Path) -> list[tuple[int, Path]]:
    """The run's epoch checkpoints that hold a manifest, ``(epoch, folder)``, oldest first."""
    if not run_dir.is_dir():
        return []
    found = []
    for path in run_dir.iterdir():
        match = _EPOCH_FOLDER.match(path.name)
        if match and (path / MANIFEST).is_file():
            found.append((int(match.group(1)), path))
    return sorted(found)


def prune_epoch_checkpoints(run_dir: Path, keep: int, epoch: int) -> None:
    """Remove the epoch checkpoints except those of epochs ``epoch − keep + 1 … epoch``."""
    if not run_dir.is_dir():
        return
    for path in run_dir.iterdir():
        match = _EPOCH_FOLDER.match(path.name)
        if match and path.is_dir() and not epoch - keep < int(match.group(1)) <= epoch:
            shutil.rmtree(path, ignore_errors=True)


def checkpoint_in(path: str | Path) -> Path:
    """The checkpoint folder that ``path`` names: a checkpoint folder itself, or a run
    folder's ``best`` (its ``last`` while no epoch has ended, e.g. a run stopped in epoch
    1); otherwise a one-line ValueError saying which of these it is not."""
    directory = Path(path)
    if not directory.exists():
        raise ValueError(
            f"{directory} does not exist (give a run folder such as runs/pos_wsj, or one of "
            "its checkpoints, runs/pos_wsj/best)"
        )
    if (directory / MANIFEST).is_file():
        return directory
    if (directory / "best").is_dir():
        return directory / "best"  # a damaged best is reported by the loader, not skipped
    if (directory / "last" / MANIFEST).is_file():
        return directory / "last"
    if (directory / "config.toml").is_file():
        raise ValueError(
            f"{directory} holds a run with no checkpoint yet (it stopped before its first save)"
        )
    raise ValueError(f"{directory}: no checkpoint here ({MANIFEST} is missing)")


def checkpoint_to_resume(run_dir: Path) -> Path:
    """``run_dir/last``, or a one-line ValueError that says why there is nothing to resume."""
    last = run_dir / "last"
    if not run_dir.is_dir():
        raise ValueError(
            f"nothing to resume: {run_dir} does not exist (check run_dir, or start the run "
            "without --resume)"
        )
    if not (last / MANIFEST).is_file():
        raise ValueError(
            f"nothing to resume: {run_dir} holds no checkpoint yet (the run stopped before "
            "its first save); start it afresh with --overwrite"
        )
    return last


def check_compatible(
    last: Path, config: Config, spec: TaskSpec, stored: Config, stored_spec: TaskSpec | None
) -> None:
    """A resumed run must build the same model; other changes only warn."""
    same_model = stored.model == config.model and stored.seq2seq == config.seq2seq
    if not same_model or stored_spec != spec:
        raise ValueError(
            f"{last} holds a different model (model config or task spec differ); resume "
            "with the configuration it was started with"
        )
    now, then = config_to_dict(config), config_to_dict(stored)
    changed = [
        f"{section}.{key}"
        for section in ("data", "train")
        for key in now[section]
        if now[section][key] != then[section].get(key)
        and f"{section}.{key}" not in HARMLESS_CHANGES
    ]
    if changed:
        warnings.warn(
            f"resuming with changed settings {', '.join(changed)}: the run will not match "
            "an uninterrupted one",
            # Trainer.run's caller (through start.load_to_resume, start_run and Trainer._run)
            stacklevel=6,
        )


def append_metrics(run_dir: Path, line: dict[str, Any]) -> None:
    """Add one epoch's line to ``metrics.jsonl``."""
    with open(run_dir / METRICS_FILE, "a", encoding="utf-8") as f:
        f.write(json.dumps(line) + "\n")
        f.flush()


def truncate_metrics(run_dir: Path, epochs: int) -> list[dict[str, Any]]:
    """Keep the metrics of the first ``epochs`` epochs (later ones belong to lost work)."""
    path = run_dir / METRICS_FILE
    lines, _ = read_metrics(path)  # a line cut short by a crash is dropped
    kept = [line for line in lines if line.get("epoch", 0) <= epochs]
    if len(kept) != len(lines):
        write_atomic(path, "".join(json.dumps(line) + "\n" for line in kept).encode())
    return kept


def read_metrics(path: Path) -> tuple[list[dict[str, Any]], int | None]:
    """The metrics lines of ``path`` and the number of the first line that is not whole
    JSON (``None``: every line is)."""
    lines: list[dict[str, Any]] = []
    cut = None
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return [], None
    except (OSError, UnicodeDecodeError):
        return [], 1
    for number, row in enumerate(text.splitlines(), start=1):
        if not row.strip():
            continue
        try:
            value = json.loads(row)
        except json.JSONDecodeError:
            cut = cut or number
            continue
        if isinstance(value, dict):
            lines.append(value)
        else:
            cut = cut or number
    return lines, cut
