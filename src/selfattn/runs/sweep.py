"""A sweep: every combination of a grid of config values × seeds, each its own run folder,
trained by N worker processes at one thread each, resumable, summarised as mean ±
standard deviation over seeds.

Each member is ``python -m selfattn train CONFIG --set ... --set train.threads=1`` into
``OUT/<name>`` (the name made of its grid values and seed, e.g.
``score=dot_normalizer=softmax_seed=0``); then its test split is scored, as ``selfattn
eval OUT/<name> --split test`` does, into ``OUT/<name>/test_metrics.json`` (when the data
have a test split). Run again, the same command skips a finished member, resumes an
interrupted one from its ``last`` checkpoint (the trainer's ``--resume``) and starts the
others. Every combination is validated with the config loader (field names, types, ranges, what the
architecture reads) before any member starts. ``OUT/sweep.json`` records the config the
sweep was started with; a folder holding the runs of another config is refused.
"""

from __future__ import annotations

import itertools
import json
import math
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

import torch

from selfattn.config import Config, config_to_dict, load_config, parse_value
from selfattn.runs.plot import plot_sweep
from selfattn.runs.table import (
    TEST_FILE,
    RunRecord,
    dev_metrics,
    flatten,
    format_value,
    read_run,
    text_table,
)
from selfattn.tasks import Predictor
from selfattn.tasks.run import check_before_loading
from selfattn.train.checkpoint import MANIFEST, write_atomic
from selfattn.train.run_dir import HARMLESS_CHANGES

SWEEP_FILE = "sweep.json"
LOG_FOLDER = "logs"
#: Fields that may differ between a sweep's runs and its record without making them
#: another config's (how a run is executed, not what it trains).
EXECUTION_FIELDS = ("run_dir", "train.threads", "train.device", *HARMLESS_CHANGES)
#: Metrics of a report that are not scores (sizes, settings).
NOT_METRICS = ("count", "truncated")
#: Seconds a member has to save its checkpoint after the sweep passes on Ctrl-C.
STOP_SECONDS = 120.0
_NAME_CHARACTERS = re.compile(r"[^A-Za-z0-9._+=-]+")


@dataclass(frozen=True)
class GridAxis:
    """One ``--grid section.field=v1,v2,…``: the field and its values as written."""

    field: str
    values: tuple[str, ...]

    @property
    def short(self) -> str:
        return self.field.split(".")[-1]


@dataclass
class Member:
    """One run of the sweep: a combination of grid values and a seed."""

    name: str
    values: dict[str, str]
    seed: int
    overrides: list[str]
    run_dir: Path
    config: Config

    @property
    def combination(self) -> tuple[str, ...]:
        return tuple(self.values.values())


@dataclass
class Sweep:
    """A validated sweep, ready to run."""

    config_path: Path
    axes: list[GridAxis]
    seeds: list[int]
    sets: list[str]
    out: Path
    members: list[Member] = field(default_factory=list)

    def record(self) -> dict[str, Any]:
        """What ``sweep.json`` holds: the config every member shares and the grid."""
        return {
            "config": str(self.config_path),
            "base": shared_fields(self.members[0].config, self.axes),
            "grid": {axis.field: list(axis.values) for axis in self.axes},
            "seeds": self.seeds,
            "sets": self.sets,
            "members": {m.name: {"values": m.values, "seed": m.seed} for m in self.members},
        }


# ----------------------------------------------------------------------- parsing


def parse_axis(text: str) -> GridAxis:
    """``section.field=v1,v2,…`` as a :class:`GridAxis`.

    Raises:
        ValueError: one line: not ``section.field=values``, an empty value, a value
            given twice, ``train.seed`` (that is ``--seeds``) or ``run_dir``.
    """
    name, sep, raw = text.partition("=")
    name = name.strip()
    if not sep or "." not in name or not raw.strip():
        raise ValueError(f"--grid {text!r} is not of the form section.field=value1,value2,…")
    if name == "train.seed":
        raise ValueError("--grid train.seed: give the seeds with --seeds 0,1,2")
    values = tuple(value.strip() for value in raw.split(","))
    if any(not value for value in values):
        raise ValueError(f"--grid {text}: an empty value")
    repeated = sorted({v for v in values if values.count(v) > 1})
    if repeated:
        raise ValueError(f"--grid {text}: {', '.join(repeated)} given twice")
    return GridAxis(name, values)


def parse_seeds(text: str) -> list[int]:
    """``0,1,2`` as seeds.

    Raises:
        ValueError: a seed that is not a whole number ≥ 0, or one given twice.
    """
    seeds = []
    for part in text.split(","):
        part = part.strip()
        if not part.isdigit():
            raise ValueError(f"--seeds {text}: {part!r} is not a seed (a whole number >= 0)")
        seeds.append(int(part))
    if len(set(seeds)) != len(seeds):
        raise ValueError(f"--seeds {text}: a seed given twice")
    return seeds


def member_name(values: dict[str, str], axes: Sequence[GridAxis], seed: int) -> str:
    """``score=dot_normalizer=softmax_seed=0``: each grid value after its field's name
    (the whole ``section.field`` when two sections share the name), then the seed."""
    shorts = [axis.short for axis in axes]
    parts = []
    for axis in axes:
        label = axis.short if shorts.count(axis.short) == 1 else axis.field
        parts.append(f"{label}={values[axis.field]}")
    parts.append(f"seed={seed}")
    return _NAME_CHARACTERS.sub("-", "_".join(parts))


# ----------------------------------------------------------------------- planning


def plan(
    config_path: Path,
    grid: Sequence[str],
    seeds: Sequence[int] | None,
    sets: Sequence[str],
    out: Path | None,
    jobs: int,
) -> Sweep:
    """Validate a sweep and name its members; nothing is trained or written.

    Raises:
        ValueError: one line: a bad ``--grid`` / ``--seeds`` / ``--jobs``, a grid field the
            config's architecture does not read or a value of the wrong type (naming the
            combination), a ``--set`` of ``run_dir`` or ``train.seed`` with ``--seeds``,
            or ``out`` holding the runs of another config.
    """
    cores = os.cpu_count() or 1
    if jobs < 1 or jobs > cores:
        raise ValueError(
            f"--jobs {jobs}: give 1 to {cores} (worker processes, one thread each, on "
            f"this machine's {cores} cores)"
        )
    axes = [parse_axis(text) for text in grid]
    fields = [axis.field for axis in axes]
    twice = sorted({name for name in fields if fields.count(name) > 1})
    if twice:
        raise ValueError(f"--grid {twice[0]} given twice; put all its values in one --grid")
    for override in sets:
        key = override.partition("=")[0].strip()
        if key == "run_dir":
            raise ValueError(f"--set {override}: a sweep names its runs' folders (use -o DIR)")
        if key == "train.seed" and seeds is not None:
            raise ValueError(f"--set {override}: the seeds are given by --seeds")
        if key in fields:
            raise ValueError(f"--set {override}: {key} is also a --grid field")
    base = load_config(config_path, list(sets))
    out = Path(out) if out is not None else base.run_dir.with_name(base.run_dir.name + "-sweep")
    seeds = list(seeds) if seeds is not None else [base.train.seed]
    sweep = Sweep(config_path, axes, seeds, list(sets), out)
    for combination in itertools.product(*(axis.values for axis in axes)):
        values = dict(zip(fields, combination, strict=True))
        for seed in seeds:
            sweep.members.append(_member(sweep, values, seed))
    check_folder(sweep)
    return sweep


def _member(sweep: Sweep, values: dict[str, str], seed: int) -> Member:
    name = member_name(values, sweep.axes, seed)
    run_dir = sweep.out / name
    grid = [f"{key}={value}" for key, value in values.items()]
    overrides = [*sweep.sets, *grid, f"train.seed={seed}", "train.threads=1", f"run_dir={run_dir}"]
    where = ", ".join([*grid, f"seed {seed}"])
    try:
        config = load_config(sweep.config_path, overrides)
        check_before_loading(config)
    except ValueError as error:
        message = re.sub(r" \(from --set [^)]*\)$", "", str(error))
        raise ValueError(f"--grid ({where}): {message}") from None
    for key, value in values.items():
        section, _, name_in_section = key.partition(".")
        options = getattr(config, section, None)
        if (
            options is None
            or not hasattr(options, name_in_section)
            or getattr(options, name_in_section) != _coerced(parse_value(value), options, key)
        ):  # a field of another architecture, set to its default, is dropped by the loader
            architecture = config.model.architecture
            raise ValueError(
                f"--grid {key}: architecture {architecture!r} does not read it "
                f"(selfattn config {architecture} lists the fields it reads)"
            )
    return Member(name, values, seed, overrides, run_dir, config)


def _coerced(value: Any, options: Any, key: str) -> Any:
    """``value`` as the loader stores it in ``options`` (an int given for a float field)."""
    current = getattr(options, key.partition(".")[2])
    if isinstance(current, float) and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if isinstance(current, Path) and isinstance(value, str):
        return Path(value)
    return value


def shared_fields(config: Config, axes: Sequence[GridAxis]) -> dict[str, Any]:
    """The config's fields as ``section.field → value`` (JSON values), without the
    grid's fields, the seed and those of :data:`EXECUTION_FIELDS`."""
    skip = {*EXECUTION_FIELDS, "train.seed", *(axis.field for axis in axes)}
    flat = json.loads(json.dumps(flatten(config_to_dict(config))))
    return {key: value for key, value in flat.items() if key not in skip}


def check_folder(sweep: Sweep) -> None:
    """Refuse an output folder that holds the runs of another config: its ``sweep.json``
    records other shared fields, or a member's run folder another config.

    Raises:
        ValueError: one line naming the folder and the first field that differs.
    """
    record_path = sweep.out / SWEEP_FILE
    if sweep.out.exists() and not sweep.out.is_dir():
        raise ValueError(f"-o {sweep.out}: a file, not a folder")
    if record_path.is_file():
        try:
            stored = json.loads(record_path.read_text(encoding="utf-8"))
            then = stored["base"]
        except (OSError, UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError):
            raise ValueError(f"{record_path}: not a sweep record; choose another -o") from None
        now = sweep.record()["base"]
        _refuse_difference(sweep.out, now, then, f"{record_path} was started with")
    for member in sweep.members:
        stored_config = member.run_dir / "config.toml"
        if not stored_config.is_file():
            continue
        try:
            then = shared_fields(load_config(stored_config), [])
        except ValueError as error:
            raise ValueError(f"{stored_config}: {error}; choose another -o") from None
        then["train.seed"] = load_config(stored_config).train.seed
        now = {**shared_fields(member.config, []), "train.seed": member.seed}
        _refuse_difference(sweep.out, now, then, f"{member.run_dir} holds a run with")


def _refuse_difference(out: Path, now: dict[str, Any], then: dict[str, Any], what: str) -> None:
    # Fields on one side only are a grid's (an earlier sweep of the folder tried other
    # fields): the rest must agree.
    changed = [key for key in now if key in then and now[key] != then[key]]
    if changed:
        key = changed[0]
        more = f" (and {len(changed) - 1} more fields)" if len(changed) > 1 else ""
        raise ValueError(
            f"{out} holds the runs of another config: {what} {key} = "
            f"{format_value(then.get(key))}, this sweep has {format_value(now.get(key))}"
            f"{more}; choose another -o folder"
        )


# ----------------------------------------------------------------------- running


@dataclass
class Outcome:
    """What became of a member: ``trained``, ``resumed``, ``skipped`` (finished before),
    ``failed`` (with the last line of its log) or ``interrupted``."""

    member: Member
    status: str
    seconds: float = 0.0
    note: str = ""


def member_command(member: Member, config_path: Path, *, resume: bool) -> list[str]:
    """The ``python -m selfattn train`` command of a member."""
    command = [sys.executable, "-m", "selfattn", "train", str(config_path), "--no-progress"]
    for override in member.overrides:
        command += ["--set", override]
    command.append("--resume" if resume else "--overwrite")
    return command


def one_thread_environment() -> dict[str, str]:
    env = dict(os.environ)
    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        env[name] = "1"
    return env


def _interrupt_on_sigterm() -> Callable[[], None]:
    """Make SIGTERM stop the sweep as Ctrl-C does (its members are in sessions of their
    own, so a SIGTERM to the sweep alone would leave them running); returns what puts the
    previous handler back. Outside the main thread, nothing."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None

    def interrupt(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt("terminated")

    previous = signal.signal(signal.SIGTERM, interrupt)

    def restore() -> None:
        signal.signal(signal.SIGTERM, previous)

    return restore


@dataclass
class Job:
    """A member's training, running."""

    member: Member
    process: subprocess.Popen[bytes]
    began: float
    kind: str  # trained or resumed
    log: Any


def score_test(member: Member) -> dict[str, Any] | None:
    """The member's metrics on its data's test split, at one thread in this process
    (``None`` when the data have no test split).

    Raises:
        ValueError: the run cannot be scored (one line: why).
    """
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        predictor = Predictor(member.run_dir)
        metrics = predictor.evaluate("test")
    finally:
        torch.set_num_threads(threads)
    if not metrics.get("count", 1):
        return None
    return {"split": "test", **metrics}


class Runner:
    """Runs a sweep's members, ``jobs`` at a time, each in a session of its own (so that
    Ctrl-C reaches the sweep alone, which passes one SIGINT to each member: the trainer
    then saves ``last`` at its next step and stops); scores each finished member's test
    split here, and keeps it as its ``test_metrics.json``.

    Args:
        sweep: what to run.
        jobs: worker processes.
        say: writes one progress line.
    """

    def __init__(self, sweep: Sweep, jobs: int, say: Callable[[str], None]) -> None:
        self.sweep = sweep
        self.jobs = jobs
        self.say = say
        self.logs = sweep.out / LOG_FOLDER
        self.outcomes: list[Outcome] = []

    def run(self) -> list[Outcome]:
        """Every member, finished or skipped; raises KeyboardInterrupt after passing a
        Ctrl-C on and waiting for the members to save."""
        self.sweep.out.mkdir(parents=True, exist_ok=True)
        self.logs.mkdir(exist_ok=True)
        write_atomic(
            self.sweep.out / SWEEP_FILE,
            (json.dumps(self.sweep.record(), indent=1) + "\n").encode(),
        )
        waiting = list(self.sweep.members)
        running: list[Job] = []
        try:
            terminate = _interrupt_on_sigterm()
            while waiting or running:
                while waiting and len(running) < self.jobs:
                    job = self._start(waiting.pop(0))
                    if job is not None:
                        running.append(job)
                for job in list(running):
                    if job.process.poll() is None:
                        continue
                    running.remove(job)
                    job.log.close()
                    self._finished(job)
                time.sleep(0.05)
        except BaseException:  # Ctrl-C, SIGTERM or a failure here: no member left running
            self._stop([job.process for job in running])
            for job in running:
                job.log.close()
            raise
        finally:
            terminate()
        return self.outcomes

    def _start(self, member: Member) -> Job | None:
        """Start the member's training; ``None`` when it finished before (then scored
        here if it was not)."""
        manifest = member.run_dir / "last" / MANIFEST
        if manifest.is_file() and read_run(member.run_dir).finished:
            if (member.run_dir / TEST_FILE).is_file():
                self._done(Outcome(member, "skipped", note="finished before"))
            else:
                self._done(Outcome(member, "scored", note=self._keep_test(member)))
            return None
        resume = manifest.is_file()
        command = member_command(member, self.sweep.config_path, resume=resume)
        log = open(self.logs / f"{member.name}.log", "ab")  # noqa: SIM115 (Job's, closed at its end)
        log.write(f"$ {' '.join(command)}\n".encode())
        log.flush()
        process = subprocess.Popen(
            command,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=one_thread_environment(),
            start_new_session=True,
        )
        return Job(member, process, time.monotonic(), "resumed" if resume else "trained", log)

    def _finished(self, job: Job) -> None:
        """Record a training that ended; score the test split of one that succeeded."""
        member, code = job.member, job.process.returncode
        seconds = time.monotonic() - job.began
        if code == 0:
            self._done(Outcome(member, job.kind, seconds, self._keep_test(member)))
        elif code in (130, -signal.SIGINT):
            self._done(Outcome(member, "interrupted", seconds))
        else:
            self._done(Outcome(member, "failed", seconds, self._last_line(member, code)))

    def _keep_test(self, member: Member) -> str:
        """Score the member's test split into its ``test_metrics.json``; a note when it
        could not be."""
        try:
            report = score_test(member)
        except (ValueError, OSError) as error:
            return f"test split not scored: {str(error).splitlines()[0]}"
        if report is None:
            return "no test split"
        write_atomic(member.run_dir / TEST_FILE, (json.dumps(report) + "\n").encode())
        return ""

    def _last_line(self, member: Member, code: int) -> str:
        try:
            text = (self.logs / f"{member.name}.log").read_text(encoding="utf-8", errors="replace")
        except OSError:
            text = ""
        lines = [line for line in text.splitlines() if line.strip()]
        return f"exit status {code}: {lines[-1] if lines else 'no output'}"

    def _done(self, outcome: Outcome) -> None:
        self.outcomes.append(outcome)
        timing = f" in {outcome.seconds:.1f} s" if outcome.seconds else ""
        note = f" ({outcome.note})" if outcome.note else ""
        total = len(self.sweep.members)
        self.say(
            f"[{len(self.outcomes)}/{total}] {outcome.member.name}: {outcome.status}{timing}{note}"
        )

    def _stop(self, processes: Sequence[subprocess.Popen[bytes]]) -> None:
        """One SIGINT to each running member, then wait for them to save and leave."""
        for process in processes:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGINT)
        deadline = time.monotonic() + STOP_SECONDS
        for process in processes:
            try:
                process.wait(timeout=max(deadline - time.monotonic(), 0.1))
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()


# ----------------------------------------------------------------------- the summary


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
        return {
            "grid": [axis.field for axis in self.axes],
            "metrics": self.metrics,
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
            for name, value in found.items():
                values.setdefault(name, []).append(value)
                if name not in names:
                    names.append(name)
        rows.append(
            {
                "values": {
                    axis.field: v
                    for axis, v in zip(sweep.axes, members[0].combination, strict=True)
                },
                "runs": runs,
                "seeds": len(members),
                "metrics": {name: mean_std(vs) for name, vs in values.items()},
            }
        )
    order = sorted(names, key=lambda n: (not n.startswith("dev"), n))
    return Summary(sweep.axes, rows, order, ranked)
