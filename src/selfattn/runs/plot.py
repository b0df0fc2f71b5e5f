"""Pictures of several runs: their learning curves (``selfattn runs --plot``) and a sweep's
mean ± standard deviation per combination (``selfattn sweep``)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from selfattn.runs.table import RunRecord


def plot_curves(records: Sequence[RunRecord], path: Path) -> Path:
    """Training loss and the ranking dev metric by epoch, one line per run, into ``path``
    (the format its suffix names: .png, .pdf, .svg …)."""
    records = [r for r in records if r.lines]
    if not records:
        raise ValueError("no run has a finished epoch to plot")
    figure = Figure(figsize=(11, 4.2), layout="constrained")
    loss_axes, dev_axes = figure.subplots(1, 2)
    metrics = sorted({r.metric for r in records if r.metric is not None})
    for record in records:
        epochs = [line["epoch"] for line in record.lines]
        loss_axes.plot(epochs, [line["train_loss"] for line in record.lines], marker=".")
        metric = record.metric
        if metric is not None:
            values = [line.get(f"dev_{metric}") for line in record.lines]
            dev_axes.plot(epochs, values, marker=".", label=record.name)
        else:
            dev_axes.plot([], [], label=record.name)
    loss_axes.set(xlabel="epoch", ylabel="training loss", title="training loss")
    dev_axes.set(
        xlabel="epoch",
        ylabel="dev " + (" / ".join(metrics) or "metric"),
        title="dev " + (" / ".join(metrics) or "metric"),
    )
    for axes in (loss_axes, dev_axes):
        axes.grid(alpha=0.3)
        axes.xaxis.set_major_locator(MaxNLocator(integer=True))
    dev_axes.legend(fontsize="small", loc="best")
    return _save(figure, path)


def plot_sweep(
    labels: Sequence[str],
    series: dict[str, tuple[Sequence[float | None], Sequence[float | None]]],
    metric: str,
    path: Path,
) -> Path:
    """One group of bars per combination (``labels``): for each of ``series``
    (``"dev"``, ``"test"`` → means and standard deviations over seeds) its mean with the
    standard deviation as an error bar."""
    figure = Figure(figsize=(max(6.0, 1.1 * len(labels) + 2), 4.5), layout="constrained")
    axes = figure.subplots()
    width = 0.8 / max(len(series), 1)
    for index, (name, (means, stds)) in enumerate(series.items()):
        xs = [i + (index - (len(series) - 1) / 2) * width for i in range(len(labels))]
        axes.bar(
            xs,
            [m if m is not None else 0.0 for m in means],
            width,
            yerr=[s if s is not None else 0.0 for s in stds],
            capsize=3,
            label=name,
        )
    axes.set_xticks(range(len(labels)), labels, rotation=30, ha="right", fontsize="small")
    axes.set(ylabel=metric, title=f"{metric}: mean ± standard deviation over seeds")
    axes.grid(axis="y", alpha=0.3)
    axes.legend()
    return _save(figure, path)


def _save(figure: Figure, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=120)
    return path
