"""A sweep's workers: each member is ``python -m selfattn train CONFIG --set ... --set
train.threads=1`` into ``OUT/<name>`` (the name made of its grid values and seed, e.g.
``score=dot_normalizer=softmax_seed=0``), ``jobs`` processes at a time; then its test
split is scored, as ``selfattn eval OUT/<name> --split test`` does, into
``OUT/<name>/test_metrics.json`` (when the data have a test split). Run again, the same
command skips a finished member, resumes an interrupted one from its ``last`` checkpoint
(the trainer's ``--resume``) and starts the others.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import FrameType
from typing import Any

import torch

from selfattn.runs.sweep_grid import SWEEP_FILE, Member, Sweep
from selfattn.runs.table import TEST_FILE, read_run
from selfattn.tasks import Predictor
from selfattn.train.checkpoint import MANIFEST, write_atomic

LOG_FOLDER = "logs"
#: Seconds a member has to save its checkpoint after the sweep passes on Ctrl-C.
STOP_SECONDS = 120.0


@dataclass
class Outcome:
    """What became of a member: ``trained``, ``resumed``, ``skipped`` (finished before),
    ``failed`` (with the last line of its log) or ``interrupted``."""

    member: Member
    status: str
    seconds: float = 0.0
    note: str = ""


def member_command(member: Member, *, resume: bool) -> list[str]:
    """The ``python -m selfattn train`` command of a member (of its config)."""
    config = str(member.config_path)
    command = [sys.executable, "-m", "selfattn", "train", config, "--no-progress"]
    for override in member.overrides:
        command += ["--set", override]
    command.append("--resume" if resume else "--overwrite")
    return command


def one_thread_environment() -> dict[str, str]:
    env = dict(os.environ)
    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        env[name] = "1"
    return env


def interrupt_on_sigterm() -> Callable[[], None]:
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
            terminate = interrupt_on_sigterm()
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
        command = member_command(member, resume=resume)
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
