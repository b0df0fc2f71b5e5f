"""The training loop: AdamW with warm-up and decay, dev evaluation, checkpoints, resuming.

The loop does not know where batches come from. It is given

* ``train_batches(epoch) -> Iterable[Batch]``: the training batches of one epoch, in the
  order to use. It must depend only on ``epoch`` and the run's seed (or draw from the
  global Python / NumPy / torch generators, which the loop seeds and checkpoints), so
  that runs repeat exactly and a resumed run sees the batches an uninterrupted one would;
* ``dev_batches() -> Iterable[Batch]`` (optional): the development set;
* ``vocabs``: JSON-ready vocabularies, stored in every checkpoint so that a saved model
  can read new text.

Each epoch appends one JSON line to ``run_dir/metrics.jsonl`` and writes ``run_dir/last/``;
``run_dir/best/`` holds the epoch with the best dev accuracy (for a regression the lowest
dev loss; without a dev set, the lowest training loss). ``last/`` is also written within
an epoch (``train.checkpoint_every``), and when Ctrl-C or SIGTERM stops the run at a step
boundary (:class:`TrainingInterrupted`). ``resume=True`` continues from ``run_dir/last/``
and ends in exactly the state an uninterrupted run reaches (:mod:`selfattn.train.start`).
A training loss, dev metric or weights that are nan or ±inf stop the run before anything
of them is saved, or, for the loss with ``train.nan_policy = "skip"``, skip the step
(:mod:`~selfattn.train.nan_guard`).

The loop's parts are modules of their own: :mod:`~selfattn.train.start` (claiming or
resuming the run folder), :mod:`~selfattn.train.loop_state` (what a checkpoint stores),
:mod:`~selfattn.train.step`, :mod:`~selfattn.train.stop_rules`,
:mod:`~selfattn.train.nan_guard`, :mod:`~selfattn.train.save_rules`,
:mod:`~selfattn.train.progress` (the console).

Started by torchrun (``WORLD_SIZE`` > 1), each process trains on its share of every batch
and only rank 0 writes files and shows progress; the loop asks
:mod:`selfattn.train.distributed` what that takes, and one process behaves as without it.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, Required, TypedDict, Unpack

import torch
from torch import nn

from selfattn.attention.backends import varying_shapes
from selfattn.config import Config
from selfattn.folder_lock import release
from selfattn.models.spec import TaskSpec
from selfattn.train.device import autocast_dtype, describe
from selfattn.train.device import resolve_device as resolve_device  # re-exported
from selfattn.train.distributed import (
    Distributed,
    StepTotals,
    World,
    check_world_size,
    units,
    unpack,
    world_from_env,
)
from selfattn.train.loop_state import LoopState, Parts
from selfattn.train.nan_guard import NanGuard, schedule_step
from selfattn.train.objective import Objective
from selfattn.train.precision import tensor_float32
from selfattn.train.progress import Progress, ProgressMode, StopOnSignal, opening_lines
from selfattn.train.result import TrainResult as TrainResult  # re-exported
from selfattn.train.rng import seed_everything as seed_everything  # re-exported
from selfattn.train.run_dir import METRICS_FILE as METRICS_FILE  # re-exported
from selfattn.train.run_dir import append_metrics
from selfattn.train.save_rules import Saves, mid_epoch_save_due
from selfattn.train.start import Started, TrainBatches, batches_to_train, start_run
from selfattn.train.step import optimizer_step
from selfattn.train.stop_rules import (
    OutOfTime,
    TimeBudget,
    interrupted,
    record_epoch,
    steps_done,
)
from selfattn.train.stop_rules import TrainingInterrupted as TrainingInterrupted  # re-exported
from selfattn.train.tensorboard import AttentionProbe, Board, open_board

DevBatches = Callable[[], Iterable[Any]]

#: Fields of a metrics line that measure the machine, not the model (they differ run to run).
TIMING_KEYS = ("tokens_per_s", "seconds")
#: Off the CPU the console's running loss is read (which waits for the device) at most
#: this often.
LOSS_SECONDS = 1.0


class TrainerOptions(TypedDict, total=False):
    """The keywords :func:`train` hands to :class:`Trainer` as they are (see there):
    ``objective`` (required), ``vocabs``, ``progress``, ``attention``."""

    objective: Required[Objective]
    vocabs: dict[str, Any] | None
    progress: bool | ProgressMode
    attention: AttentionProbe | None


def train(
    config: Config,
    spec: TaskSpec,
    train_batches: TrainBatches,
    dev_batches: DevBatches | None = None,
    *,
    resume: bool = False,
    overwrite: bool = False,
    **options: Unpack[TrainerOptions],
) -> TrainResult:
    """Train the model ``options["objective"]`` builds for ``spec``; see :class:`Trainer`
    (``resume`` and ``overwrite``: :meth:`Trainer.run`)."""
    trainer = Trainer(config, spec, train_batches, dev_batches, **options)
    return trainer.run(resume=resume, overwrite=overwrite)


def _reads_are_free(device: torch.device) -> bool:
    """Whether reading a value back from ``device`` costs no wait (on the CPU every value
    is computed by the time the next line runs)."""
    return device.type == "cpu"


class Trainer:
    """Trains one model; :meth:`run` does the work.

    Args:
        config: the run's configuration (``model`` and ``train`` sections, ``run_dir``).
        spec: the model's inputs and labels (vocabulary sizes, feature size, classes).
        train_batches: ``epoch → batches`` (see the module docstring).
        dev_batches: ``() → batches`` of the development set, or ``None``.
        objective: what is trained: builds the model, gives the loss of a batch and the
            development metrics (a :class:`~selfattn.tasks.Task`).
        vocabs: JSON-ready vocabularies to store in checkpoints.
        progress: what to show on stderr (:data:`~selfattn.train.progress.ProgressMode`):
            ``True`` or ``"auto"``: a tqdm bar on a terminal, plain lines elsewhere;
            ``False`` or ``"lines"``: plain lines (one per epoch, one per 30 s within
            one); ``"bar"``; ``"off"``: nothing.
        attention: the attention maps of a fixed dev example, drawn into the run's
            TensorBoard events (:mod:`selfattn.train.tensorboard`); ``None``: no images.
    """

    def __init__(
        self,
        config: Config,
        spec: TaskSpec,
        train_batches: TrainBatches,
        dev_batches: DevBatches | None = None,
        *,
        objective: Objective,
        vocabs: dict[str, Any] | None = None,
        progress: bool | ProgressMode = True,
        attention: AttentionProbe | None = None,
    ) -> None:
        self.config = config
        self.spec = spec
        self.train_batches = train_batches
        self.dev_batches = dev_batches
        self.vocabs = vocabs or {}
        self.progress = progress
        self.objective = objective
        self.run_dir = Path(config.run_dir)
        self.device = resolve_device(config.train.device)
        self.amp_dtype = autocast_dtype(config, self.device, stacklevel=2)
        self._console = Progress("off", 0)
        self._stop = StopOnSignal(self._console.notice)
        self.dist = Distributed(World())
        self._saves = Saves(self.run_dir, config, self.vocabs, self.dist, time.monotonic)
        self._budget = TimeBudget(config.train.max_minutes, 0.0)
        self._out_of_time = False
        self.attention = attention
        self._board = Board(self.run_dir, enabled=False)
        self._guard = NanGuard(self.run_dir, config.train, lambda: self._saves.saved)

    # ------------------------------------------------------------------ the run

    def run(self, *, resume: bool = False, overwrite: bool = False) -> TrainResult:
        """Train to ``config.train.epochs`` (or early stopping) and return the result.

        Args:
            resume: continue the run in ``run_dir`` from ``run_dir/last``.
            overwrite: start afresh even though ``run_dir`` holds a run.

        Raises:
            ValueError: ``run_dir`` already holds a run (and neither flag is set); nothing
                to resume; a checkpoint for a different model.
            TrainingInterrupted: Ctrl-C or SIGTERM; ``last`` was saved first.
        """
        train_config = self.config.train
        world = world_from_env()
        self.dist = Distributed(world, train_config.distributed, train_config.distributed_timeout)
        self._saves = Saves(self.run_dir, self.config, self.vocabs, self.dist, time.monotonic)
        if world.size > 1:
            check_world_size(world.size, self.config.data.batch_size)
            self.device = self.dist.start(self.device)
        try:
            with (
                varying_shapes(self.device),  # no cuDNN attention plans per batch shape
                tensor_float32(self.device, train_config.tf32),
            ):
                result = self._run(resume=resume, overwrite=overwrite)
        except BaseException:
            self.dist.close(wait=False)  # the other ranks fail at once instead of waiting
            raise
        finally:
            release(self.run_dir)  # the folder's lock, taken when the run was claimed
        self.dist.close()
        return result

    def _run(self, *, resume: bool, overwrite: bool) -> TrainResult:
        started = start_run(
            self.config,
            self.spec,
            self.objective,
            self.train_batches,
            self.vocabs,
            self.device,
            self.dist,
            self.amp_dtype,
            resume=resume,
            overwrite=overwrite,
        )
        state = started.state
        if started.resumed:
            self._saves.saved = state.position()
        self._console = Progress(
            self.progress if self.dist.is_main() else "off", started.total_steps, state.step
        )
        self._stop = StopOnSignal(self._console.notice)
        with self._console, self._stop:
            where = None if started.resumed else describe(self.device) + self.dist.describe()
            train = self.config.train
            for line in opening_lines(self.run_dir, train, started, where, self.dist.size):
                self._console.say(line)
            self._board = open_board(
                self.config, started, self.dist, self.attention, self._console.say
            )
            self._saves.saved_at = time.monotonic()
            self._budget = TimeBudget(train.max_minutes, self._saves.saved_at)
            try:
                with self._board:
                    self._epochs(started)
            except OutOfTime:
                self._out_of_time = True
            except TrainingInterrupted:
                raise
            except KeyboardInterrupt:  # a second Ctrl-C, or one outside our handler
                if self._saves.saved is None:
                    raise
                raise interrupted(None, self.run_dir, self._saves.saved) from None
        history = started.history
        best = next((h for h in history if h["epoch"] == state.best_epoch), None)
        model = started.parts.model
        return TrainResult(
            model, history, best, state.stopped_early, self.run_dir, self._out_of_time
        )

    def _epochs(self, started: Started) -> None:
        """Run the remaining epochs, appending each one's metrics line to its history."""
        parts, state, epochs = started.parts, started.state, self.config.train.epochs
        ran: list[float] = []  # this process's epoch times, for the time budget
        for epoch in range(state.epoch, epochs):
            if state.stopped_early or steps_done(state, self.config.train.max_steps):
                break
            mean = sum(ran) / len(ran) if ran else 0.0
            if ran and self.dist.agree(self._budget.no_time_for(mean, time.monotonic()))[0]:
                self._out_of_time = True
                self._console.say(self._budget.epoch_refused(epoch, mean, self.run_dir))
                break
            epoch_started = time.monotonic()
            batches = batches_to_train(started, epoch, self.train_batches)
            line = self._epoch(parts, batches, state)
            if started.compiled is not None and not started.compiled.reported:
                # The first epoch compiled the training and evaluation graphs.
                self._console.say(started.compiled.line())
                started.compiled.reported = True
            started.history.append(line)
            # Metrics first: a crash before `last` is saved re-runs this epoch, and the
            # resumed run drops the lines of epochs later than its checkpoint.
            self._log_metrics(line, parts.model)
            self._saves.epoch_end(parts, state)
            self._console.epoch_end(line, epochs)
            ran.append(time.monotonic() - epoch_started)
            (stop,) = self.dist.agree(self._stop.requested)
            if stop and epoch + 1 < epochs and not state.stopped_early:
                raise interrupted(f"after epoch {epoch + 1} of {epochs}", self.run_dir)

    def _log_metrics(self, line: dict[str, Any], model: nn.Module) -> None:
        """Where every epoch's metrics line goes: ``run_dir/metrics.jsonl`` and the
        TensorBoard events beside it (rank 0)."""
        if self.dist.is_main():
            append_metrics(self.run_dir, line)
            self._board.epoch(line, model)

    # ------------------------------------------------------------------ one epoch

    def _epoch(self, parts: Parts, batches: Iterable[Any], state: LoopState) -> dict[str, Any]:
        """Train the rest of one epoch, evaluate, count the epoch and its score in ``state``;
        returns its metrics line."""
        started, before = time.perf_counter(), state.train_seconds
        self._train_steps(parts, batches, state)
        line: dict[str, Any] = {
            "epoch": state.epoch + 1,
            "step": state.step,
            "train_loss": state.loss_sum / max(state.units, 1),
            "lr": max(parts.scheduler.get_last_lr()),
        }
        if self._guard.skip:
            line["skipped_steps"] = state.skipped
        dev = None
        if self.dev_batches is not None:
            with self.dist.evaluating():  # every rank, the whole dev set: the same decisions
                dev = self.objective.evaluate(parts.model, self.dev_batches(), device=self.device)
            line.update({f"dev_{key}": value for key, value in dev.items()})
            self._guard.check_dev(dev, state)
        record_epoch(state, dev, line["train_loss"], self.config.train.patience)
        line["best_epoch"] = state.best_epoch
        line["tokens_per_s"] = state.tokens / max(state.train_seconds, 1e-9)
        line["seconds"] = before + time.perf_counter() - started  # training and evaluation
        state.start_epoch()
        return line

    def _train_steps(self, parts: Parts, batches: Iterable[Any], state: LoopState) -> None:
        """One optimizer step per batch, keeping the epoch's running sums in ``state``;
        saves ``last`` when due, and stops at a step boundary when a signal asks to."""
        started = time.perf_counter()
        seconds_before = state.train_seconds
        epoch = state.epoch + 1
        train_config = self.config.train
        epochs, steps = train_config.epochs, state.steps_per_epoch
        parts.model.train()
        # Reading the epoch's loss sum waits for the step: it is read at every step where
        # reads are free and with several processes (whose agree() waits for every step
        # anyway); elsewhere for the console at most every LOSS_SECONDS, and before
        # anything saves or stops.
        every_step = _reads_are_free(self.device) or self.dist.size > 1
        loss = self._guard.epoch(state, self.device, every_step)
        shown_at, shown = -math.inf, 0.0
        for item in batches:
            if steps_done(state, train_config.max_steps):  # ends this epoch early
                break
            batch, counts = unpack(item)  # a rank's empty share of a batch counts 0
            n, tokens = (units(batch), batch.num_tokens) if counts else (0, 0)
            batch = batch.to(self.device, non_blocking=True)
            totals = self._step(parts, batch, state.step, n, tokens, self._guard.skip)
            schedule_step(parts.scheduler, skipped=totals.skipped)
            state.step += 1
            state.batch += 1
            loss.add(totals)  # counts a skipped step; too many in a row stop the run
            state.units += totals.units
            state.tokens += totals.tokens
            state.train_seconds = seconds_before + time.perf_counter() - started
            rate = state.tokens / max(state.train_seconds, 1e-9)
            now = time.monotonic()
            if _reads_are_free(self.device) or now - shown_at >= LOSS_SECONDS:
                loss.read()
                shown_at = now
                shown = state.loss_sum / max(state.units, 1)
            self._console.step(f"{epoch}/{epochs}", state.batch, steps, shown, rate)
            # Between steps, never inside one: a signal only sets a flag that is read here
            # (by every rank at the same step).
            now = time.monotonic()
            stop, save_due, out_of_time = self.dist.agree(
                self._stop.requested,
                mid_epoch_save_due(
                    state, train_config.checkpoint_every, now - self._saves.saved_at
                ),
                self._budget.no_time_for(0.0, now),
            )
            if stop or save_due or out_of_time:
                loss.read()
            if stop:
                self._saves.within_epoch(parts, state)
                raise interrupted(f"at {self._saves.saved}", self.run_dir)
            ends_epoch = state.batch >= steps or steps_done(state, train_config.max_steps)
            if out_of_time and not ends_epoch:
                self._saves.within_epoch(parts, state)
                self._console.say(self._budget.passed(self._saves.saved, self.run_dir))
                raise OutOfTime
            if save_due:
                self._saves.within_epoch(parts, state)
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)  # the epoch's time includes its queued steps
            state.train_seconds = seconds_before + time.perf_counter() - started
        loss.read()

    def _step(
        self, parts: Parts, batch: Any, step: int, n: int, tokens: int, skip: bool = False
    ) -> StepTotals:
        """One optimizer step (:func:`~selfattn.train.step.optimizer_step`)."""
        clip = self.config.train.grad_clip
        return optimizer_step(
            parts, batch, step, n, tokens, self.dist, self.amp_dtype, clip, skip_not_finite=skip
        )
