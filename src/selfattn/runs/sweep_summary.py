"""A sweep's summary: per combination of grid values (the config first when the sweep has
several), every dev and test metric and the runs' training seconds as mean ± standard
deviation over its seeds, as a text table, ``summary.json`` and a plot."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from selfattn.runs.plot import plot_sweep
from selfattn.runs.sweep_grid import GridAxis, Member, Sweep
from selfattn.runs.table import RunRecord, dev_metrics, read_run, text_table

#: Metrics of a report that are not scores (sizes, settings).
NOT_METRICS = ("count", "truncated")
#: Each run's training time, its epochs' seconds from metrics.jsonl added up (dev scoring
#: included): read from the runs, so the same whichever invocation of the sweep trained them.
TRAIN_SECONDS = "train seconds"


def mean_std(values: Sequence[float]) -> tuple[float | None, float | None]:
    """The mean and the sample standard deviation (``None`` for one value or none)."""
    if not values:
        return None, None
    mean = sum(values) / len(values)
    if len(values) < 2:
        return mean, None
    variance = sum((v - mean) ** 2 for v in values) / (len(values) - 1)
    return mean, math.sqrt(variance)


def _numbers(metrics: dict[str, Any] | None) -> dict[str, float]:
    return {
        key: float(value)
        for key, value in (metrics or {}).items()
        if isinstance(value, int | float)
        and not isinstance(value, bool)
        and not key.endswith(NOT_METRICS)
    }


@dataclass
class Summary:
    """A sweep's results: per combination, every dev / test metric over its seeds."""

    axes: list[GridAxis]
    rows: list[dict[str, Any]]
    metrics: list[str]
    ranked: str | None

    def table(self) -> str:
        header = [*(axis.short for axis in self.axes), "seeds", *self.metrics]
        body = []
        for row in self.rows:
            cells = [*row["values"].values(), f"{row['runs']}/{row['seeds']}"]
            for metric in self.metrics:
                mean, std = row["metrics"].get(metric, (None, None))
                if mean is None:
                    cells.append("-")
                elif std is None:
                    cells.append(f"{mean:.4f}")
                else:
                    cells.append(f"{mean:.4f} ± {std:.4f}")
            body.append(cells)
        return text_table(header, body)

    def to_json(self) -> dict[str, Any]:
        """The table as JSON: ``rows`` as built, and ``combinations``, the same means and
        standard deviations keyed by the combination's values joined by ``-`` and the
        metric's name with ``_`` for spaces (``dot-softmax`` → ``test_accuracy`` →
        ``mean``), names a record's keys can hold."""
        return {
            "grid": [axis.field for axis in self.axes],
            "metrics": self.metrics,
            "combinations": {
                "-".join(str(value) for value in row["values"].values()) or "all": {
                    name.replace(" ", "_"): {"mean": mean, "std": std}
                    for name, (mean, std) in row["metrics"].items()
                }
                for row in self.rows
            },
            "rows": [
                {
                    **row,
                    "metrics": {
                        name: {"mean": mean, "std": std}
                        for name, (mean, std) in row["metrics"].items()
                    },
                }
                for row in self.rows
            ],
        }

    def plot(self, path: Path) -> Path | None:
        """The ranking metric's mean ± std per combination, dev and test; ``None`` when
        no run has it."""
        if self.ranked is None:
            return None
        labels = [
            " ".join(f"{axis.short}={row['values'][axis.field]}" for axis in self.axes)
            or "all runs"
            for row in self.rows
        ]
        series: dict[str, tuple[Sequence[float | None], Sequence[float | None]]] = {}
        for split in ("dev", "test"):
            name = f"{split} {self.ranked}"
            if name in self.metrics:
                pairs = [row["metrics"].get(name, (None, None)) for row in self.rows]
                series[split] = ([p[0] for p in pairs], [p[1] for p in pairs])
        return plot_sweep(labels, series, self.ranked, path) if series else None


def summarise(sweep: Sweep) -> Summary:
    """Read every member's run folder and gather its metrics by combination: the dev
    metrics of its best epoch, the test metrics it was scored with."""
    groups: dict[tuple[str, ...], list[Member]] = {}
    for member in sweep.members:
        groups.setdefault(member.combination, []).append(member)
    records: dict[str, RunRecord] = {
        m.name: read_run(m.run_dir) for m in sweep.members if m.run_dir.is_dir()
    }
    rows, names, ranked = [], [], None
    for members in groups.values():
        values: dict[str, list[float]] = {}
        runs = 0
        for member in members:
            record = records.get(member.name)
            best = None if record is None else record.best
            if record is None or best is None:
                continue
            runs += 1
            ranked = ranked or record.metric
            found = {f"dev {k}": v for k, v in _numbers(dev_metrics(best)).items()}
            found.update({f"test {k}": v for k, v in _numbers(record.test).items()})
            found[TRAIN_SECONDS] = record.seconds  # what the result cost, whenever trained
            for name, value in found.items():
                values.setdefault(name, []).append(value)
                if name not in names:
                    names.append(name)
        rows.append(
            {
                "values": {
                    axis.field: v
                    for axis, v in zip(sweep.columns, members[0].combination, strict=True)
                },
                "runs": runs,
                "seeds": len(members),
                "metrics": {name: mean_std(vs) for name, vs in values.items()},
            }
        )
    order = sorted(names, key=lambda n: (not n.startswith("dev"), n))
    return Summary(sweep.columns, rows, order, ranked)
