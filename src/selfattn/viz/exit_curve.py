"""Early exit's accuracy against computation (lecture 003, dynamic computation): as the
confidence threshold rises, examples run more blocks and accuracy climbs towards the full
depth's; the fixed depths (every example leaving after block k) are the baseline the
adaptive curve should lie above."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from matplotlib.figure import Figure

if TYPE_CHECKING:  # the result it draws; viz imports nothing above it at run time
    from selfattn.tasks.early_exit import ExitSweep


def exit_curve_figure(
    sweep: ExitSweep, *, tolerance: float = 0.01, title: str | None = None
) -> Figure:
    """Accuracy (y) against mean blocks run (x): the threshold sweep as a line with each
    threshold written beside its point, the fixed depths as squares, the full depth's
    accuracy less ``tolerance`` dotted, and the cheapest threshold above it
    (:meth:`ExitSweep.best`) starred."""
    fig = Figure(figsize=(6.4, 4.4), layout="constrained")
    ax = fig.subplots()
    xs = [p.mean_layers for p in sweep.points]
    ys = [100 * p.accuracy for p in sweep.points]
    ax.plot(xs, ys, "o-", color="tab:blue", label=f"early exit ({sweep.criterion} ≥ T)")
    # Each threshold beside its point, unless it would print over the last one written.
    span_x = max(len(sweep.fixed) - 1, 1)
    span_y = max(max(ys) - min(ys), 1e-9)
    written: tuple[float, float] | None = None
    for point, x, y in zip(sweep.points, xs, ys, strict=True):
        if written and abs(x - written[0]) < 0.06 * span_x and abs(y - written[1]) < 0.06 * span_y:
            continue
        ax.annotate(
            f"{point.threshold:g}",
            (x, y),
            textcoords="offset points",
            xytext=(4, -10),
            fontsize=7,
        )
        written = (x, y)
    ax.plot(
        [p.mean_layers for p in sweep.fixed],
        [100 * p.accuracy for p in sweep.fixed],
        "s--",
        color="tab:gray",
        label="fixed depth (exit k for every example)",
    )
    floor = 100 * (sweep.full_depth.accuracy - tolerance)
    ax.axhline(
        floor,
        color="tab:red",
        linestyle=":",
        linewidth=1,
        label=f"full depth − {100 * tolerance:g} point",
    )
    best = sweep.best(tolerance)
    if best is not None:
        ax.plot(
            [best.mean_layers],
            [100 * best.accuracy],
            "*",
            color="tab:red",
            markersize=14,
            label=f"T = {best.threshold:g}: {best.mean_layers:.2f} blocks",
        )
    ax.set_xlabel("mean blocks run per example")
    ax.set_ylabel("accuracy (%)")
    ax.set_xticks(range(1, len(sweep.fixed) + 1))
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    if title:
        ax.set_title(title)
    return fig


def plot_exit_curve(
    sweep: ExitSweep,
    path: str | os.PathLike[str],
    *,
    tolerance: float = 0.01,
    title: str | None = None,
) -> Path:
    """Write :func:`exit_curve_figure` to ``path`` (the format follows its suffix).

    Returns:
        The path written.
    """
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    exit_curve_figure(sweep, tolerance=tolerance, title=title).savefig(out, dpi=120)
    return out
