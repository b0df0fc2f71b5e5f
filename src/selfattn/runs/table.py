"""Run folders side by side: what each one is (task, architecture, the config fields that
differ between them), how far it got and its best dev and test metrics.

A run folder holds ``config.toml`` and ``metrics.jsonl`` (:mod:`selfattn.train.run_dir`);
a scored one also ``test_metrics.json`` (what ``selfattn eval RUN --split test`` printed,
which ``selfattn sweep`` stores). Everything here is read from those files and the JSON
manifest of ``last/`` (no weights are loaded), so a folder of hundreds of runs lists in
a moment. A run folder that is half-written (no checkpoint manifest yet, a metrics line
cut short, an unreadable config) is a :class:`RunRecord` with a ``problem``, never an
exception.
"""

from __future__ import annotations

import json
import math
import tomllib
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from selfattn.train.checkpoint import MANIFEST
from selfattn.train.run_dir import METRICS_FILE, read_metrics

CONFIG_FILE = "config.toml"
#: Where a run's test-split metrics are kept (``selfattn eval RUN --split test``'s JSON).
TEST_FILE = "test_metrics.json"
#: The dev metrics the training loop ranks epochs by, in the order it looks for them.
RANKED = ("set_f1", "accuracy", "rmse", "loss")
#: Config fields never shown as a difference (each run has its own).
OWN_FIELDS = ("run_dir",)


@dataclass
class RunRecord:
    """What one run folder holds.

    Attributes:
        path: the run folder.
        name: its path relative to the folder listed.
        config: its ``config.toml`` flattened to ``section.field → value``.
        lines: its metrics lines (complete ones only).
        task: the task type its checkpoint stores (``sequence``, ``token`` …).
        test: its test metrics, when scored.
        state: the training loop's state in ``last`` (epoch, step, stopped early …).
        problem: why it is half-written (``None``: it is whole).
    """

    path: Path
    name: str
    config: dict[str, Any] = field(default_factory=dict)
    lines: list[dict[str, Any]] = field(default_factory=list)
    task: str | None = None
    test: dict[str, Any] | None = None
    state: dict[str, Any] = field(default_factory=dict)
    problem: str | None = None

    @property
    def architecture(self) -> str:
        return str(self.config.get("model.architecture", "transformer"))

    @property
    def epochs_planned(self) -> int | None:
        value = self.config.get("train.epochs")
        return value if isinstance(value, int) else None

    @property
    def best(self) -> dict[str, Any] | None:
        """The metrics line of the best epoch (the last line names it)."""
        if not self.lines:
            return None
        best_epoch = self.lines[-1].get("best_epoch")
        return next((line for line in self.lines if line.get("epoch") == best_epoch), None)

    @property
    def metric(self) -> str | None:
        """The dev metric that ranks the run's epochs (``accuracy``, ``rmse`` …)."""
        best = self.best or {}
        return next((name for name in RANKED if f"dev_{name}" in best), None)

    @property
    def seconds(self) -> float:
        return float(sum(line.get("seconds", 0.0) for line in self.lines))

    @property
    def stopped_early(self) -> bool:
        return bool(self.state.get("stopped_early"))

    @property
    def finished(self) -> bool:
        """Its ``last`` checkpoint ends the run: ``train.epochs`` done, stopped early, or
        ``train.max_steps`` reached."""
        epoch, step = self.state.get("epoch", 0), self.state.get("step", 0)
        planned, max_steps = self.epochs_planned, self.config.get("train.max_steps")
        return (
            self.stopped_early
            or (planned is not None and epoch >= planned)
            or (isinstance(max_steps, int) and step >= max_steps)
        )

    def to_json(self, shown: Sequence[str] = ()) -> dict[str, Any]:
        best = self.best
        return {
            "run": self.name,
            "path": str(self.path),
            "problem": self.problem,
            "task": self.task,
            "architecture": self.architecture,
            "fields": {name: self.config.get(name) for name in shown},
            "epochs": len(self.lines),
            "epochs_planned": self.epochs_planned,
            "finished": self.finished,
            "stopped_early": self.stopped_early,
            "seconds": self.seconds,
            "best_epoch": None if best is None else best.get("epoch"),
            "metric": self.metric,
            "dev": None if best is None else dev_metrics(best),
            "test": self.test,
        }


def dev_metrics(line: dict[str, Any]) -> dict[str, Any]:
    """The ``dev_*`` numbers of a metrics line, without the prefix."""
    return {key[4:]: value for key, value in line.items() if key.startswith("dev_")}


def find_runs(folder: Path) -> list[Path]:
    """The run folders at or under ``folder`` (a folder with ``config.toml`` or
    ``metrics.jsonl``; one inside a run is not looked for), sorted by path.

    Raises:
        ValueError: ``folder`` does not exist or is not a folder.
    """
    if not folder.exists():
        raise ValueError(f"{folder} does not exist (give a folder of runs, e.g. runs)")
    if not folder.is_dir():
        raise ValueError(f"{folder} is not a folder (give a folder of runs, e.g. runs)")
    return sorted(_walk(folder))


def _walk(folder: Path) -> Iterator[Path]:
    if (folder / CONFIG_FILE).is_file() or (folder / METRICS_FILE).is_file():
        yield folder
        return
    try:
        children = sorted(p for p in folder.iterdir() if p.is_dir() and not p.is_symlink())
    except OSError:
        return
    for child in children:
        yield from _walk(child)


def read_run(path: Path, root: Path | None = None) -> RunRecord:
    """One run folder as a :class:`RunRecord`; a half-written one has its ``problem``."""
    name = str(path.relative_to(root)) if root is not None and path != root else path.name
    record = RunRecord(path, name or str(path))
    problems: list[str] = []
    config_path = path / CONFIG_FILE
    try:
        record.config = flatten(tomllib.loads(config_path.read_text(encoding="utf-8")))
    except FileNotFoundError:
        problems.append(f"no {CONFIG_FILE}")
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as error:
        problems.append(f"{config_path}: unreadable ({_first_line(error)})")
    record.lines, cut = read_metrics(path / METRICS_FILE)
    if cut is not None:
        problems.append(f"{path / METRICS_FILE}:{cut}: a line cut short")
    manifest = _manifest(path)
    if manifest is None:
        problems.append("no checkpoint manifest (it stopped, or is, before its first save)")
    else:
        vocabs, spec = manifest.get("vocabs") or {}, manifest.get("spec") or {}
        record.task = vocabs.get("task") or spec.get("task")
        record.state = manifest.get("state") or {}
    test_path = path / TEST_FILE
    if test_path.is_file():
        try:
            record.test = json.loads(test_path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
            problems.append(f"{test_path}: unreadable ({_first_line(error)})")
    if problems:
        record.problem = "half-written: " + "; ".join(problems)
    return record


def read_runs(folder: Path) -> list[RunRecord]:
    """Every run at or under ``folder``, read (see :func:`find_runs`)."""
    return [read_run(path, folder) for path in find_runs(folder)]


def _manifest(path: Path) -> dict[str, Any] | None:
    for checkpoint in ("last", "best"):
        try:
            value = json.loads((path / checkpoint / MANIFEST).read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError):
            continue
        if isinstance(value, dict):
            return value
    return None


def _first_line(error: BaseException) -> str:
    return (str(error).splitlines() or [type(error).__name__])[0]


def flatten(values: dict[str, Any]) -> dict[str, Any]:
    """A config's nested tables as ``section.field → value`` (top-level keys as they are)."""
    flat: dict[str, Any] = {}
    for key, value in values.items():
        if isinstance(value, dict):
            flat.update({f"{key}.{name}": item for name, item in value.items()})
        else:
            flat[key] = value
    return flat


def differing_fields(records: Iterable[RunRecord]) -> list[str]:
    """The config fields whose values are not the same in every run (a field a run's
    architecture lacks counts as a value of its own), in the order of the first run's
    config; the run folder itself is never one."""
    records = [r for r in records if r.config]
    names: dict[str, None] = {}
    for record in records:
        names.update(dict.fromkeys(record.config))
    return [
        name
        for name in names
        if name not in OWN_FIELDS
        and len({json.dumps(r.config.get(name), sort_keys=True) for r in records}) > 1
    ]


# ------------------------------------------------------------------------- the table


def format_value(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{value:.4f}" if math.isfinite(value) and abs(value) < 1e5 else f"{value:.4g}"
    return str(value)


def format_seconds(seconds: float) -> str:
    """``42s``, ``3m05s``, ``2h07m``."""
    whole = round(seconds)
    if whole < 60:
        return f"{whole}s"
    if whole < 3600:
        return f"{whole // 60}m{whole % 60:02d}s"
    return f"{whole // 3600}h{whole % 3600 // 60:02d}m"


def text_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Columns padded to their widest cell, two spaces apart, a rule under the header."""
    widths = [max(len(str(cell)) for cell in column) for column in zip(header, *rows, strict=True)]
    lines = [
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in [header, *rows]
    ]
    lines.insert(1, "  ".join("-" * width for width in widths))
    return "\n".join(lines)


def runs_table(records: Sequence[RunRecord]) -> str:
    """The whole runs as one table (half-written ones are not in it: see
    :func:`half_written_lines`)."""
    whole = [r for r in records if r.problem is None]
    shown = differing_fields(whole)
    header = ["run", "task", "architecture", *shown, "best dev", "test", "epochs", "time"]
    rows = []
    for record in whole:
        best, metric = record.best, record.metric
        dev = (
            "-"
            if best is None or metric is None
            else (f"{metric} {format_value(best[f'dev_{metric}'])} (epoch {best['epoch']})")
        )
        test = "-"
        if record.test is not None and metric is not None and metric in record.test:
            test = f"{metric} {format_value(record.test[metric])}"
        planned = record.epochs_planned
        epochs = f"{len(record.lines)}/{planned}" if planned is not None else str(len(record.lines))
        if record.stopped_early:
            epochs += " (stopped early)"
        rows.append(
            [
                record.name,
                record.task or "-",
                record.architecture,
                *(format_value(record.config.get(name)) for name in shown),
                dev,
                test,
                epochs,
                format_seconds(record.seconds),
            ]
        )
    return text_table(header, rows)


def half_written_lines(records: Sequence[RunRecord]) -> list[str]:
    """One line for each half-written run: its folder and what is missing."""
    return [f"{record.path}: {record.problem}" for record in records if record.problem]


def runs_json(records: Sequence[RunRecord]) -> list[dict[str, Any]]:
    """Every run (half-written ones with their ``problem``) as JSON-ready values."""
    shown = differing_fields(r for r in records if r.problem is None)
    return [record.to_json(shown) for record in records]
