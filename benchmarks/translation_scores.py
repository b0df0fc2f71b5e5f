"""Score trained translation runs side by side: each run's decodings of a split (greedy,
beam K, NAT) by `selfattn eval` (BLEU and chrF, sacrebleu), with what its training cost
(optimizer steps, minutes, the best epoch's dev accuracy, read from its metrics.jsonl),
as a Markdown table and then one JSON line keyed by run name.

Usage::

    python benchmarks/translation_scores.py runs/bible/transformer runs/bible/rnn \
        --decodings greedy,beam5 --jobs 2
    python benchmarks/translation_scores.py NAME=RUN ... --split dev --decodings beam5
    python benchmarks/translation_scores.py NAME=RUN --split dev --average 3
    python benchmarks/translation_scores.py NAME=RUN --split dev --decodings beam5-lp0.6,beam5

``beamK-lpA`` is beam K with GNMT's length penalty α = A (``selfattn eval --length-penalty``;
``beamK`` keeps the run's own), so the penalty is chosen on dev in one command.

``--average K`` also scores each run's last K epochs averaged (``selfattn average RUN
--last K -o RUN-avgK``; the run must have kept them, ``train.keep_epochs >= K``) as a row
``NAME-avgK`` beside the run's best epoch: checkpoint averaging chosen on dev.

Each decoding is its own `python -m selfattn eval` process at one thread; ``--jobs`` of them
run at once. A folder that is not a finished run is refused in one line (exit status 2).
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from selfattn.runs.table import read_run
from selfattn.train.average import write_average

FLAGS = {"greedy": ["--greedy"], "nat": ["--nat"]}


BEAM = re.compile(r"beam(?P<k>[1-9]\d*)(?:-lp(?P<alpha>\d+(?:\.\d+)?))?")


def decoding_flags(name: str) -> list[str]:
    """``greedy`` → ``--greedy``, ``beam5`` → ``--beam 5``, ``beam5-lp0.6`` → ``--beam 5
    --length-penalty 0.6``, ``nat`` → ``--nat``."""
    if name in FLAGS:
        return FLAGS[name]
    beam = BEAM.fullmatch(name)
    if beam is None:
        raise ValueError(
            f"--decodings: {name!r} is not greedy, nat, beamK or beamK-lpA (e.g. beam5-lp0.6)"
        )
    flags = ["--beam", beam["k"]]
    return flags if beam["alpha"] is None else [*flags, "--length-penalty", beam["alpha"]]


def training(run: Path) -> dict[str, float]:
    """What the run's training cost and reached, as ``selfattn runs`` reads it: epochs,
    optimizer steps, the epochs' seconds added up (as minutes), the best epoch and its dev
    accuracy."""
    record = read_run(run)
    best = record.best
    if record.problem is not None or best is None:
        raise ValueError(f"{run}: not a finished run ({record.problem or 'no epoch scored'})")
    return {
        "epochs": len(record.lines),
        "steps": record.lines[-1]["step"],
        "train_minutes": round(record.seconds / 60, 1),
        "best_epoch": best["epoch"],
        "dev_accuracy": best.get("dev_accuracy", float("nan")),
    }


def evaluate(run: Path, decoding: str, args: argparse.Namespace) -> dict[str, float]:
    """One `selfattn eval` of ``run``: its JSON report and the seconds it took."""
    command = [sys.executable, "-m", "selfattn", "eval", str(run), "--split", args.split]
    command += [*decoding_flags(decoding), "--threads", str(args.threads)]
    if args.batch_size is not None:
        command += ["--batch-size", str(args.batch_size)]
    began = time.monotonic()
    done = subprocess.run(command, capture_output=True, text=True)
    seconds = time.monotonic() - began
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        said = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise RuntimeError(f"{run} {decoding}: selfattn eval exited {done.returncode}: {said}")
    report = json.loads(lines[-1])
    scores = {k: report[k] for k in ("bleu", "chrf") if isinstance(report.get(k), int | float)}
    return {**scores, "seconds": round(seconds, 1)}


def with_averages(
    runs: dict[str, Path], results: dict[str, dict[str, Any]], last: int
) -> tuple[dict[str, Path], dict[str, dict[str, Any]]]:
    """``runs`` and their rows, each followed by its last ``last`` epochs averaged into
    ``RUN-avgK`` (as ``selfattn average``; a folder it wrote before is replaced) as a row
    ``NAME-avgK`` with the run's training and no dev accuracy of its own.

    Raises:
        ValueError: ``last`` below 1, or the average's one-line refusal (a run that kept
            fewer epoch checkpoints).
    """
    if last < 1:
        raise ValueError(f"--average {last}: give 1 or more epochs")
    all_runs, all_results = {}, {}
    for name, run in runs.items():
        all_runs[name], all_results[name] = run, results[name]
        out = run.with_name(f"{run.name}-avg{last}")
        write_average(run, last, out, overwrite=True)  # what `selfattn average` runs
        averaged = {**results[name], "dev_accuracy": None, "best_epoch": f"last {last}"}
        all_runs[f"{name}-avg{last}"], all_results[f"{name}-avg{last}"] = out, averaged
    return all_runs, all_results


def parse_runs(items: list[str]) -> dict[str, Path]:
    """``NAME=FOLDER`` or ``FOLDER`` (named after it; a folder whose own name holds ``=``,
    as a sweep's members' do, is taken whole); every folder must hold a run."""
    runs: dict[str, Path] = {}
    for item in items:
        whole = "=" not in item or Path(item).is_dir()
        name, _, folder = ("", "", item) if whole else item.partition("=")
        path = Path(folder)
        name = name or path.name
        if not (path / "metrics.jsonl").is_file():
            raise ValueError(f"{path}: not a run folder (no metrics.jsonl)")
        if name in runs:
            raise ValueError(f"{name}: named twice (give NAME=FOLDER)")
        runs[name] = path
    return runs


def table(results: dict[str, dict[str, Any]], decodings: list[str]) -> str:
    """The results as a Markdown table, a row per run."""
    header = ["run", "epochs", "steps", "training min", "dev accuracy (best epoch)"]
    header += [f"{d} BLEU / chrF" for d in decodings]
    rows = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    for name, found in results.items():
        cells = [
            name,
            str(found["epochs"]),
            str(found["steps"]),
            f"{found['train_minutes']:.1f}",
            _dev_accuracy(found),
        ]
        for decoding in decodings:
            scores = found[decoding]
            cells.append(f"{scores.get('bleu', float('nan')):.2f} / {scores.get('chrf', 0):.1f}")
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows)


def _dev_accuracy(found: dict[str, Any]) -> str:
    """The best epoch's dev accuracy and the epoch, or, for an average, which epochs."""
    if found["dev_accuracy"] is None:
        return f"— ({found['best_epoch']} averaged)"
    return f"{found['dev_accuracy']:.3f} ({found['best_epoch']})"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", metavar="[NAME=]RUN")
    parser.add_argument("--split", default="test", choices=("dev", "test"))
    parser.add_argument("--decodings", default="greedy,beam5")
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--threads", type=int, default=1, help="threads of each eval")
    parser.add_argument("--batch-size", type=int, help="selfattn eval --batch-size")
    parser.add_argument(
        "--average",
        type=int,
        metavar="K",
        help="also score each run's last K epochs averaged, as a row NAME-avgK",
    )
    args = parser.parse_args(argv)
    try:
        runs = parse_runs(args.runs)
        decodings = args.decodings.split(",")
        for decoding in decodings:
            decoding_flags(decoding)
        if args.jobs < 1:
            raise ValueError(f"--jobs {args.jobs}: give 1 or more")
        results = {name: training(run) for name, run in runs.items()}
        if args.average is not None:
            runs, results = with_averages(runs, results, args.average)
    except ValueError as err:
        print(f"translation_scores.py: error: {err}", file=sys.stderr)
        return 2
    work = [(name, decoding) for name in runs for decoding in decodings]
    with ThreadPoolExecutor(args.jobs) as pool:
        done = pool.map(lambda job: evaluate(runs[job[0]], job[1], args), work)
        try:
            for (name, decoding), scores in zip(work, done, strict=True):
                results[name][decoding] = scores
                print(f"{name} {decoding}: {scores}", file=sys.stderr)
        except RuntimeError as err:
            print(f"translation_scores.py: error: {err}", file=sys.stderr)
            return 1
    print(f"\n{args.split} split:\n")
    print(table(results, decodings))
    print(json.dumps(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
