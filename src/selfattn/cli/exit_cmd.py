"""``selfattn eval RUN --exit-threshold T`` and ``--exit-sweep``: early exit of a model
trained with ``model.exit_heads = true`` (:mod:`selfattn.tasks.early_exit`)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from selfattn.models.early_exit import EXIT_CRITERIA
from selfattn.tasks import Predictor
from selfattn.tasks.early_exit import (
    SWEEP_THRESHOLDS,
    TOLERANCE,
    ExitSweep,
    check_exit_request,
    evaluate_early_exit,
    exit_sweep,
)
from selfattn.tasks.labelling import LabelTask
from selfattn.tasks.scored_data import DataFile
from selfattn.train.run_dir import checkpoint_in
from selfattn.viz import plot_exit_curve


def add_exit_arguments(parser: argparse.ArgumentParser) -> None:
    """The early-exit options of ``selfattn eval``."""
    group = parser.add_argument_group(
        "early exit (a model trained with model.exit_heads = true; others refuse these)"
    )
    choice = group.add_mutually_exclusive_group()
    choice.add_argument(
        "--exit-threshold",
        type=float,
        metavar="T",
        help="each example stops after the first block whose classifier's confidence is >= "
        "T (0: after block 1; above 1: every block); reports accuracy, the mean blocks run "
        "and the wall time per example against the full depth",
    )
    choice.add_argument(
        "--exit-sweep",
        action="store_true",
        help="accuracy against mean blocks run over the thresholds "
        f"{', '.join(f'{t:g}' for t in SWEEP_THRESHOLDS)} and at each fixed depth, the "
        f"cheapest threshold within {100 * TOLERANCE:g} point of the full depth, and a plot",
    )
    group.add_argument(
        "--exit-criterion",
        choices=EXIT_CRITERIA,
        help="the confidence: max-prob, the largest class probability (default), or "
        "entropy, 1 - H(p) / log C; a token task's example is as sure as its least sure "
        "token",
    )
    group.add_argument(
        "-o",
        "--output",
        type=Path,
        help="--exit-sweep: the plot to write (default: exit_sweep_SPLIT.png in the run folder)",
    )


def exit_requested(args: argparse.Namespace) -> bool:
    """Whether ``eval`` was asked for early exit; an exit option without a threshold or a
    sweep is refused (one line)."""
    if args.exit_threshold is not None or args.exit_sweep:
        return True
    for flag in ("exit_criterion", "output"):
        if getattr(args, flag) is not None:
            name = "-o" if flag == "output" else "--exit-criterion"
            raise ValueError(f"{name} needs --exit-threshold T or --exit-sweep")
    return False


def run_exit_eval(args: argparse.Namespace, options: dict[str, object]) -> int:
    """Score the checkpoint's split (or the labelled file of ``--data``) with early exit:
    one threshold as JSON, or the sweep as a table with a plot, then as one JSON line."""
    if args.output is not None and not args.exit_sweep:
        raise ValueError("-o needs --exit-sweep (the plot it names)")
    criterion = args.exit_criterion or "max-prob"
    predictor = Predictor(args.checkpoint)
    model = check_exit_request(predictor.model, args.exit_threshold, criterion)
    task = predictor.task
    assert isinstance(task, LabelTask)  # an exit model is a token or sequence model
    task.check_options(options)
    scored = args.split if args.data is None else DataFile(args.data, args.format)
    examples = [
        task.fit(model, example, truncate=args.truncate, windows=False)
        for example in task.split_examples(scored)
    ]
    name = args.split if args.data is None else args.data.stem
    batches = task.batches_of(examples)
    if not args.exit_sweep:
        metrics = evaluate_early_exit(model, batches, args.exit_threshold, criterion)
        report = {
            **({"split": args.split} if args.data is None else {"data": str(args.data)}),
            "exit_criterion": criterion,
            "exit_threshold": args.exit_threshold,
            **metrics,
        }
        print(json.dumps(report))
        return 0
    sweep = exit_sweep(model, batches, SWEEP_THRESHOLDS, criterion)
    print(f"{predictor.config.data.dataset} {scored}: early exit on {criterion}")
    print(f"{'threshold':>10}  {'accuracy':>8}  {'mean blocks':>11}")
    for point in sweep.points:
        print(f"{point.threshold:>10g}  {point.accuracy:>8.4f}  {point.mean_layers:>11.3f}")
    print(
        "fixed depth: " + "  ".join(f"{int(p.mean_layers)}: {p.accuracy:.4f}" for p in sweep.fixed)
    )
    best = sweep.best()
    full = sweep.full_depth
    if best is None:  # pragma: no cover - the thresholds above 1 reach the full depth
        print(
            f"no threshold within {100 * TOLERANCE:g} point of the full depth ({full.accuracy:.4f})"
        )
    else:
        print(
            f"within {100 * TOLERANCE:g} point of the full depth ({full.accuracy:.4f}, "
            f"{int(full.mean_layers)} blocks) with the fewest blocks: T = {best.threshold:g}, "
            f"accuracy {best.accuracy:.4f}, {best.mean_layers:.3f} blocks"
        )
    path = args.output or checkpoint_in(args.checkpoint).parent / f"exit_sweep_{name}.png"
    title = f"{predictor.config.data.dataset} ({scored}): early exit"
    print(f"wrote {plot_exit_curve(sweep, path, tolerance=TOLERANCE, title=title)}")
    print(json.dumps({"split": name, **sweep_values(sweep)}))
    return 0


def sweep_values(sweep: ExitSweep) -> dict[str, object]:
    """The sweep as one flat JSON object, the line a record reads: ``accuracy_T0.7`` and
    ``blocks_T0.7`` per threshold, ``accuracy_block3`` per fixed depth."""
    values: dict[str, object] = {"exit_criterion": sweep.criterion}
    for point in sweep.points:
        values[f"accuracy_T{point.threshold:g}"] = point.accuracy
        values[f"blocks_T{point.threshold:g}"] = point.mean_layers
    for point in sweep.fixed:
        values[f"accuracy_block{int(point.mean_layers)}"] = point.accuracy
    return values
