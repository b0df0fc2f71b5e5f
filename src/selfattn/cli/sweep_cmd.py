"""``selfattn sweep CONFIG [CONFIG …] --grid section.field=v1,v2 --seeds 0,1,2 [--jobs N]``:
every combination × seed (× config, when several are given) trained as its own run, N at a
time, resumable, then a table of mean ± standard deviation over seeds and a plot
(:mod:`selfattn.runs.sweep_grid`, :mod:`selfattn.runs.sweep_workers`,
:mod:`selfattn.runs.sweep_summary`)."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from selfattn.cli.model_cmds import add_set_argument
from selfattn.folder_lock import held
from selfattn.messages import plural
from selfattn.runs.sweep_grid import Sweep, parse_seeds, plan
from selfattn.runs.sweep_summary import summarise
from selfattn.runs.sweep_workers import Outcome, Runner


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``selfattn sweep``."""
    parser.add_argument(
        "configs",
        type=Path,
        nargs="+",
        metavar="CONFIG",
        help="a TOML file, e.g. configs/sentiment_rt.toml; several make one more axis of "
        "the grid, config (each file's name without .toml), the first of every combination",
    )
    parser.add_argument(
        "--grid",
        action="append",
        default=[],
        metavar="SECTION.FIELD=V1,V2,…",
        help="a field and the values to try (repeatable: every combination is run), "
        "e.g. --grid model.score=dot,scaled_dot,additive",
    )
    parser.add_argument(
        "--seeds",
        metavar="S1,S2,…",
        help="train.seed of each run of a combination (default: the seed of the (first) config)",
    )
    parser.add_argument(
        "--jobs",
        type=int,
        default=1,
        metavar="N",
        help="runs trained at once, each a process of one thread (default 1)",
    )
    add_set_argument(parser, "override a config field in every run (repeatable)")
    parser.add_argument(
        "-o",
        "--output",
        type=Path,
        metavar="DIR",
        help="the sweep's folder: a run folder per combination and seed, logs/, "
        "sweep.json, summary.json, sweep.png (default: the first config's run_dir + -sweep)",
    )


def run(args: argparse.Namespace) -> int:
    """Plan (every refusal happens here, before any run starts), run, summarise; exit
    status 1 when a run failed."""
    seeds = parse_seeds(args.seeds) if args.seeds is not None else None
    sweep = plan(args.configs, args.grid, seeds, args.overrides, args.output, args.jobs)
    sweep.out.mkdir(parents=True, exist_ok=True)
    with held(sweep.out, "a sweep"):  # the same sweep started twice would train runs twice
        return _run(sweep, args)


def _run(sweep: Sweep, args: argparse.Namespace) -> int:
    combinations = len({member.combination for member in sweep.members})
    print(
        f"sweep {sweep.out}: {plural(combinations, 'combination')} × "
        f"{plural(len(sweep.seeds), 'seed')} = {plural(len(sweep.members), 'run')}, "
        f"{args.jobs} at a time (logs in {sweep.out / 'logs'})",
        file=sys.stderr,
    )
    began = time.monotonic()
    try:
        outcomes = Runner(sweep, args.jobs, lambda line: print(line, file=sys.stderr)).run()
    except KeyboardInterrupt:
        raise KeyboardInterrupt(
            "interrupted; every run was left resumable: run the same command again to go on"
        ) from None
    timing = _timing(outcomes, time.monotonic() - began)
    if timing["runs_trained"]:
        trained = plural(int(timing["runs_trained"]), "run")
        print(
            f"{trained} trained in {timing['wall_seconds']:.0f} s "
            f"of wall clock, {args.jobs} at a time; one after another their own times "
            f"add up to {timing['run_seconds']:.0f} s",
            file=sys.stderr,
        )
    summary = summarise(sweep)
    print(summary.table())
    (sweep.out / "summary.json").write_text(
        json.dumps({**summary.to_json(), "timing": timing}, indent=1) + "\n", encoding="utf-8"
    )
    picture = summary.plot(sweep.out / "sweep.png")
    if picture is not None:
        print(f"wrote {picture}", file=sys.stderr)
    failed = [outcome for outcome in outcomes if outcome.status in ("failed", "interrupted")]
    for outcome in failed:
        print(
            f"selfattn sweep: {outcome.member.name} {outcome.status}: {outcome.note}",
            file=sys.stderr,
        )
    return 1 if failed else 0


def _timing(outcomes: list[Outcome], wall: float) -> dict[str, float]:
    """This invocation's wall clock beside the sum of the times of the runs it trained
    (or resumed): what the same runs cost one after another, each as long as it took here."""
    trained = [o for o in outcomes if o.status in ("trained", "resumed")]
    return {
        "runs_trained": len(trained),
        "wall_seconds": round(wall, 1),
        "run_seconds": round(sum(o.seconds for o in trained), 1),
    }
