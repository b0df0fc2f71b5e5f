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
with weights, optimizer, schedule, RNG states, counters and the epoch's running sums
restored. Mid-epoch, it calls ``train_batches(epoch)`` again from the RNG state that
epoch began with, skips the batches already trained on, and then restores the RNG state
of the saved step (so a generator may also draw batch by batch). It ends in exactly the
state an uninterrupted run reaches (on the CPU; CUDA kernels need not be deterministic).

Started by torchrun (``WORLD_SIZE`` > 1), each process trains on its share of every batch
and only rank 0 writes files and shows progress; the loop asks
:mod:`selfattn.train.distributed` what that takes, and one process behaves as without it.
"""

from __future__ import annotations

import contextlib
import math
import random
import time
import warnings
from collections.abc import Callable, Iterable, Iterator, Sized
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from selfattn.attention.backends import varying_shapes
from selfattn.config import Config, config_to_toml
from selfattn.messages import plural
from selfattn.models.checkpointing import enable_activation_checkpointing
from selfattn.models.task_model import TaskSpec
from selfattn.train.checkpoint import (
    Checkpoint,
    get_rng_state,
    load_checkpoint,
    save_checkpoint,
    set_rng_state,
    write_atomic,
)
from selfattn.train.distributed import (
    Distributed,
    StepTotals,
    World,
    check_world_size,
    units,
    unpack,
    world_from_env,
)
from selfattn.train.init_from import load_initial_weights
from selfattn.train.objective import Objective
from selfattn.train.optim import WarmupDecay, build_optimizer, build_scheduler
from selfattn.train.precision import tensor_float32
from selfattn.train.progress import Progress, ProgressMode, StopOnSignal
from selfattn.train.run_dir import METRICS_FILE as METRICS_FILE  # re-exported
from selfattn.train.run_dir import (
    append_metrics,
    check_compatible,
    checkpoint_to_resume,
    claim_run_dir,
    epoch_checkpoint,
    prune_epoch_checkpoints,
    truncate_metrics,
)

TrainBatches = Callable[[int], Iterable[Any]]
DevBatches = Callable[[], Iterable[Any]]

#: Fields of a metrics line that measure the machine, not the model (they differ run to run).
TIMING_KEYS = ("tokens_per_s", "seconds")
#: ``train.checkpoint_every = None``: save ``last`` after this many seconds of training.
CHECKPOINT_SECONDS = 120.0
#: Off the CPU the console's running loss is read (which waits for the device) at most
#: this often.
LOSS_SECONDS = 1.0
#: The loop state of an epoch in progress: batches done and the running sums of its metrics.
_EPOCH_START: dict[str, Any] = {
    "batch": 0,
    "loss_sum": 0.0,
    "units": 0,
    "tokens": 0,
    "train_seconds": 0.0,
}


class TrainingInterrupted(KeyboardInterrupt):
    """Ctrl-C or SIGTERM stopped training; ``last`` holds a checkpoint to resume from.

    Attributes:
        checkpoint: the folder of that checkpoint (``run_dir/last``).
    """

    def __init__(self, message: str, checkpoint: Path) -> None:
        super().__init__(message)
        self.checkpoint = checkpoint


@dataclass
class TrainResult:
    """What :func:`train` returns.

    Attributes:
        model: the model after the last epoch run (the best one is in ``run_dir/best``).
        history: every epoch's metrics line, including those before a resume.
        best: the metrics line of the best epoch (``None`` if no epoch ran).
        stopped_early: training stopped for lack of improvement (``patience``).
        run_dir: where checkpoints and metrics are.
        out_of_time: ``train.max_minutes`` ended the run before ``train.epochs`` (or
            early stopping); ``--resume`` goes on from ``last``.
    """

    model: nn.Module
    history: list[dict[str, Any]]
    best: dict[str, Any] | None
    stopped_early: bool
    run_dir: Path
    out_of_time: bool = False


class _OutOfTime(Exception):
    """``train.max_minutes`` passed within an epoch; ``last`` was saved at that step."""


@dataclass
class _Parts:
    """What one run trains and steps, and the RNG state its current epoch began with."""

    model: nn.Module
    optimizer: torch.optim.Optimizer
    scheduler: torch.optim.lr_scheduler.LambdaLR
    scaler: torch.amp.GradScaler | None
    loss: Callable[[Any, int], torch.Tensor]  # (batch, step) → loss, through DDP / FSDP
    epoch_rng: dict[str, Any] | None = None


def train(
    config: Config,
    spec: TaskSpec,
    train_batches: TrainBatches,
    dev_batches: DevBatches | None = None,
    *,
    objective: Objective,
    vocabs: dict[str, Any] | None = None,
    resume: bool = False,
    overwrite: bool = False,
    progress: bool | ProgressMode = True,
) -> TrainResult:
    """Train the model ``objective`` builds for ``spec``; see :class:`Trainer`."""
    trainer = Trainer(
        config,
        spec,
        train_batches,
        dev_batches,
        objective=objective,
        vocabs=vocabs,
        progress=progress,
    )
    return trainer.run(resume=resume, overwrite=overwrite)


def selection_score(dev: dict[str, float]) -> float:
    """What chooses the best epoch from dev metrics: a label set's F1, else accuracy,
    else (regression) minus the loss."""
    for metric in ("set_f1", "accuracy"):
        if metric in dev:
            return dev[metric]
    return -dev["loss"]


def _reads_are_free(device: torch.device) -> bool:
    """Whether reading a value back from ``device`` costs no wait (on the CPU every value
    is computed by the time the next line runs)."""
    return device.type == "cpu"


def seed_everything(seed: int) -> None:
    """Seed Python's, NumPy's and torch's global generators (CUDA's included)."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def resolve_device(name: str) -> torch.device:
    """``"auto"`` → CUDA when available, else the CPU; ``"cuda"`` without CUDA is an error."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise ValueError("train.device is 'cuda' but no CUDA device is available")
    return torch.device(name)


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
        self.amp_dtype: torch.dtype | None = None
        if config.train.amp:
            if self.device.type == "cuda":
                bf16 = torch.cuda.is_bf16_supported()
                self.amp_dtype = torch.bfloat16 if bf16 else torch.float16
            else:
                warnings.warn(
                    "train.amp is only used on CUDA; training in float32 on the CPU",
                    stacklevel=2,
                )
        if config.train.tf32 and self.device.type != "cuda":
            warnings.warn(
                f"train.tf32 is only used on CUDA; {self.device.type} multiplies in float32",
                stacklevel=2,
            )
        if getattr(config.model, "linear_layers", "torch") == "onednn" and (
            self.device.type != "cpu" or self.amp_dtype is not None
        ):
            warnings.warn(
                f"model.linear_layers = 'onednn' is for float32 training on the CPU; on "
                f"{self.device.type} the linear layers run PyTorch's F.linear",
                stacklevel=2,
            )
        self._console = Progress("off", 0)
        self._stop = StopOnSignal(self._console.notice)
        self.dist = Distributed(World())
        self._last_save = 0.0
        self._saved: str | None = None  # where the loop stood at the last saved `last`
        self._started = 0.0  # time.monotonic() when this process's epochs began
        self._out_of_time = False

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
        self.dist.close()
        return result

    def _run(self, *, resume: bool, overwrite: bool) -> TrainResult:
        train_config = self.config.train
        last = checkpoint_to_resume(self.run_dir) if resume else None
        self._claim(last is None, overwrite)
        if train_config.threads is not None:  # None: the count the process runs with
            from selfattn.runtime import configure_threads

            configure_threads(train_config.threads)
        seed_everything(train_config.seed)
        model = self.objective.build().to(self.device)
        initialised_from = None
        if last is None and train_config.init_from is not None:  # resuming reads `last`
            initialised_from = load_initial_weights(
                model, train_config.init_from, self.config, self.spec, self.vocabs
            )
        if train_config.checkpoint_activations and not enable_activation_checkpointing(model):
            raise ValueError(
                f"train.checkpoint_activations = true: architecture "
                f"{self.config.model.architecture!r} has no stack of blocks to recompute; "
                "leave it false"
            )
        loss = self.dist.wrap(model, self.objective)  # FSDP shards: the optimizer comes after
        optimizer = build_optimizer(model, train_config)
        scaler = (
            torch.amp.GradScaler("cuda") if self.amp_dtype is torch.float16 else None
        )  # bf16 needs no loss scaling
        epoch_rng = get_rng_state()  # what train_batches(0) draws from
        first_epoch: Iterable[Any] | None = None
        checkpoint: Checkpoint | None = None
        if last is not None:
            checkpoint = load_checkpoint(last, map_location=self.device)
            if "averaged_from" in checkpoint.state:
                raise ValueError(
                    f"{last} is an average of checkpoints, for inference only (it holds no "
                    "optimizer state); it cannot be resumed"
                )
            check_compatible(last, self.config, self.spec, checkpoint.config, checkpoint.spec)
            state = {**_EPOCH_START, **checkpoint.state}
            started_with = state.get("threads")
            if train_config.threads is None and started_with is not None:
                # The default count follows the machine's load; a resumed run keeps the
                # count its run started with, so it ends as an uninterrupted run would.
                torch.set_num_threads(int(started_with))
        else:
            first_epoch = self._epoch_batches(0)
            assert isinstance(first_epoch, Sized)
            state = {
                "epoch": 0,
                "step": 0,
                "steps_per_epoch": len(first_epoch),
                "best_score": None,
                "best_epoch": None,
                "bad_epochs": 0,
                "stopped_early": False,
                "threads": torch.get_num_threads(),
                **_EPOCH_START,
            }
        trained_by = state.pop("world_size", 1)
        if self.dist.size > 1:
            check_world_size(self.dist.size, self.config.data.batch_size, state["steps_per_epoch"])
            state["world_size"] = self.dist.size
        total_steps = state["steps_per_epoch"] * train_config.epochs
        if train_config.max_steps is not None:
            total_steps = min(total_steps, train_config.max_steps)
        scheduler = build_scheduler(optimizer, train_config, total_steps)
        parts = _Parts(model, optimizer, scheduler, scaler, loss, epoch_rng)
        if checkpoint is not None:
            history = self._restore(parts, checkpoint, state, total_steps)
        else:
            history = []
            if self.dist.is_main():
                write_atomic(self.run_dir / "config.toml", config_to_toml(self.config).encode())

        self._console = Progress(
            self.progress if self.dist.is_main() else "off", total_steps, state["step"]
        )
        self._stop = StopOnSignal(self._console.notice)
        with self._console, self._stop:
            self._console.say(self._opening(state, resumed=last is not None))
            if initialised_from is not None:
                self._console.say(f"starting from the weights of {initialised_from}")
            if last is not None and trained_by != self.dist.size:
                self._console.say(
                    f"resuming a run of {plural(trained_by, 'process')} with "
                    f"{self.dist.size}: the batches are global, so it goes on as before"
                )
            self._last_save = self._started = time.monotonic()
            try:
                self._epochs(parts, state, history, first_epoch)
            except _OutOfTime:
                self._out_of_time = True
            except TrainingInterrupted:
                raise
            except KeyboardInterrupt:  # a second Ctrl-C, or one outside our handler
                if self._saved is None:
                    raise
                raise TrainingInterrupted(
                    f"interrupted at once; the last checkpoint ({self._saved}) is in "
                    f"{self.run_dir / 'last'}",
                    self.run_dir / "last",
                ) from None
        best = next((h for h in history if h["epoch"] == state["best_epoch"]), None)
        return TrainResult(
            model, history, best, bool(state["stopped_early"]), self.run_dir, self._out_of_time
        )

    def _claim(self, fresh: bool, overwrite: bool) -> None:
        """Create ``run_dir`` and, for a fresh run, claim it (rank 0; its refusal is
        every rank's)."""
        refusal = None
        if self.dist.is_main():
            self.run_dir.mkdir(parents=True, exist_ok=True)
            if fresh:
                try:
                    claim_run_dir(self.run_dir, overwrite)
                except ValueError as error:
                    if self.dist.size == 1:
                        raise
                    refusal = str(error)
        self.dist.settle(refusal)

    def _restore(
        self, parts: _Parts, checkpoint: Checkpoint, state: dict[str, Any], total_steps: int
    ) -> list[dict[str, Any]]:
        """Put the run back as ``checkpoint`` left it; returns the metrics lines kept."""
        self.dist.load(
            parts.model, parts.optimizer, checkpoint.model_state, checkpoint.optimizer_state
        )
        if checkpoint.scheduler_state is not None:
            parts.scheduler.load_state_dict(checkpoint.scheduler_state)
            # A resumed run may have been given more epochs: stretch the decay to them.
            schedule = parts.scheduler.lr_lambdas[0]
            assert isinstance(schedule, WarmupDecay)
            schedule.total_steps = max(total_steps, 1)
        if parts.scaler is not None and checkpoint.scaler_state is not None:
            parts.scaler.load_state_dict(checkpoint.scaler_state)
        parts.epoch_rng = checkpoint.epoch_rng_state
        if state["batch"] and parts.epoch_rng is None:
            raise ValueError(
                f"{checkpoint.directory}: a mid-epoch checkpoint without its epoch's RNG state"
            )
        set_rng_state(checkpoint.rng_state)
        self._saved = self._position(state)
        return truncate_metrics(self.run_dir, state["epoch"]) if self.dist.is_main() else []

    def _epochs(
        self,
        parts: _Parts,
        state: dict[str, Any],
        history: list[dict[str, Any]],
        first_epoch: Iterable[Any] | None,
    ) -> None:
        """Run the remaining epochs, appending each one's metrics line to ``history``."""
        epochs = self.config.train.epochs
        ran: list[float] = []  # this process's epoch times, for the time budget
        for epoch in range(state["epoch"], epochs):
            if state["stopped_early"] or self._steps_done(state):
                break
            mean = sum(ran) / len(ran) if ran else 0.0
            if ran and self.dist.agree(self._no_time_for(mean))[0]:
                self._out_of_time = True
                self._console.say(
                    f"stopping after epoch {epoch}: another epoch (~{mean:.0f} s) would "
                    f"pass train.max_minutes = {self.config.train.max_minutes:g}; "
                    f"--resume goes on from {self.run_dir / 'last'}"
                )
                break
            epoch_started = time.monotonic()
            batches: Iterable[Any]
            if state["batch"]:  # resuming mid-epoch
                batches = self._remaining_batches(epoch, state["batch"], parts.epoch_rng)
            elif epoch == 0 and first_epoch is not None:
                batches = first_epoch
            else:
                parts.epoch_rng = get_rng_state()
                batches = self._epoch_batches(epoch)
            line = self._epoch(parts, batches, state)
            history.append(line)
            # Metrics first: a crash before `last` is saved re-runs this epoch, and the
            # resumed run drops the lines of epochs later than its checkpoint.
            if self.dist.is_main():
                append_metrics(self.run_dir, line)
            self._save_epoch(parts, state, line)
            self._console.epoch_end(line, epochs)
            ran.append(time.monotonic() - epoch_started)
            (stop,) = self.dist.agree(self._stop.requested)
            if stop and epoch + 1 < epochs and not state["stopped_early"]:
                raise TrainingInterrupted(
                    f"interrupted after epoch {epoch + 1} of {epochs}; checkpoint saved in "
                    f"{self.run_dir / 'last'}",
                    self.run_dir / "last",
                )

    def _epoch_batches(self, epoch: int) -> Iterable[Any]:
        """``train_batches(epoch)``; the first epoch's as a list (the loop needs its length)."""
        batches = self.train_batches(epoch)
        if epoch == 0 and not isinstance(batches, Sized):
            batches = list(batches)
        return batches

    def _remaining_batches(
        self, epoch: int, done: int, epoch_rng: dict[str, Any] | None
    ) -> Iterator[Any]:
        """The batches of ``epoch`` after the first ``done``, as an uninterrupted run sees
        them: drawn from the RNG state the epoch began with, then the RNG put back."""
        assert epoch_rng is not None
        now = get_rng_state()
        set_rng_state(epoch_rng)
        remaining = iter(self._epoch_batches(epoch))
        for _ in range(done):
            next(remaining, None)
        set_rng_state(now)
        return remaining

    # ------------------------------------------------------------------ one epoch

    def _epoch(
        self, parts: _Parts, batches: Iterable[Any], state: dict[str, Any]
    ) -> dict[str, Any]:
        """Train the rest of one epoch, evaluate, update ``state``; returns its metrics line."""
        started, before = time.perf_counter(), state["train_seconds"]
        self._train_steps(parts, batches, state)
        line = self._epoch_line(parts, state)
        line["tokens_per_s"] = state["tokens"] / max(state["train_seconds"], 1e-9)
        line["seconds"] = before + time.perf_counter() - started  # training and evaluation
        state.update(_EPOCH_START)
        return line

    def _train_steps(self, parts: _Parts, batches: Iterable[Any], state: dict[str, Any]) -> None:
        """One optimizer step per batch, keeping the epoch's running sums in ``state``;
        saves ``last`` when due, and stops at a step boundary when a signal asks to."""
        started = time.perf_counter()
        seconds_before = state["train_seconds"]
        epoch = state["epoch"] + 1
        epochs, steps = self.config.train.epochs, state["steps_per_epoch"]
        parts.model.train()
        # The epoch's loss sum stays on the device, added to in float64 step by step as
        # state["loss_sum"] was; reading it (state["loss_sum"] = float(...)) waits for the
        # step, so off the CPU it is read for the console at most every LOSS_SECONDS and
        # before anything saves or stops.
        loss_sum = torch.tensor(state["loss_sum"], dtype=torch.float64, device=self.device)
        shown_at, shown = -math.inf, 0.0

        def read_loss() -> None:
            state["loss_sum"] = float(loss_sum)

        for item in batches:
            if self._steps_done(state):  # train.max_steps ends this epoch early
                break
            batch, counts = unpack(item)  # a rank's empty share of a batch counts 0
            n, tokens = (units(batch), batch.num_tokens) if counts else (0, 0)
            batch = batch.to(self.device, non_blocking=True)
            totals = self._step(parts, batch, state["step"], n, tokens)
            parts.scheduler.step()
            state["step"] += 1
            state["batch"] += 1
            loss_sum = loss_sum + totals.loss_sum
            state["units"] += totals.units
            state["tokens"] += totals.tokens
            state["train_seconds"] = seconds_before + time.perf_counter() - started
            rate = state["tokens"] / max(state["train_seconds"], 1e-9)
            now = time.monotonic()
            if _reads_are_free(self.device) or now - shown_at >= LOSS_SECONDS:
                read_loss()
                shown_at = now
                shown = state["loss_sum"] / max(state["units"], 1)
            self._console.step(f"{epoch}/{epochs}", state["batch"], steps, shown, rate)
            # Between steps, never inside one: a signal only sets a flag that is read here
            # (by every rank at the same step).
            stop, save_due, out_of_time = self.dist.agree(
                self._stop.requested, self._mid_epoch_save_due(state), self._no_time_for(0.0)
            )
            if stop or save_due or out_of_time:
                read_loss()
            if stop:
                self._save_last(parts, state)
                raise TrainingInterrupted(
                    f"interrupted at {self._saved}; checkpoint saved in {self.run_dir / 'last'}",
                    self.run_dir / "last",
                )
            if out_of_time and state["batch"] < steps and not self._steps_done(state):
                self._save_last(parts, state)
                self._console.say(
                    f"train.max_minutes = {self.config.train.max_minutes:g} passed at "
                    f"{self._saved} (that epoch is not scored); --resume goes on from "
                    f"{self.run_dir / 'last'}"
                )
                raise _OutOfTime
            if save_due:
                self._save_last(parts, state)
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)  # the epoch's time includes its queued steps
            state["train_seconds"] = seconds_before + time.perf_counter() - started
        read_loss()

    def _epoch_line(self, parts: _Parts, state: dict[str, Any]) -> dict[str, Any]:
        """Evaluate at an epoch's end, update the best epoch and early stopping in ``state``."""
        epoch = state["epoch"] + 1
        line: dict[str, Any] = {
            "epoch": epoch,
            "step": state["step"],
            "train_loss": state["loss_sum"] / max(state["units"], 1),
            "lr": max(parts.scheduler.get_last_lr()),
        }
        if self.dev_batches is not None:
            with self.dist.evaluating():  # every rank, the whole dev set: the same decisions
                dev = self.objective.evaluate(parts.model, self.dev_batches(), device=self.device)
            line.update({f"dev_{key}": value for key, value in dev.items()})
            score = selection_score(dev)
        else:
            score = -line["train_loss"]
        improved = state["best_score"] is None or score > state["best_score"]
        state["epoch"] = epoch
        if improved:
            state.update(best_score=score, best_epoch=epoch, bad_epochs=0)
        else:
            state["bad_epochs"] += 1
        patience = self.config.train.patience
        state["stopped_early"] = patience is not None and state["bad_epochs"] >= patience
        line["best_epoch"] = state["best_epoch"]
        return line

    def _step(self, parts: _Parts, batch: Any, step: int, n: int, tokens: int) -> StepTotals:
        """One optimizer step on ``batch``, whose loss is the mean over ``n`` units (this
        rank's, 0 for an empty share) of ``tokens``; returns its (smoothed) loss summed
        over the global batch, with its units and tokens. Nothing in it waits for the
        device in one process."""
        train_config = self.config.train
        model, optimizer, scaler = parts.model, parts.optimizer, parts.scaler
        autocast = (
            torch.autocast("cuda", dtype=self.amp_dtype)
            if self.amp_dtype is not None
            else contextlib.nullcontext()
        )
        with autocast:
            loss = parts.loss(batch, step)
        loss, totals = self.dist.reduce(loss, n, tokens)
        optimizer.zero_grad(set_to_none=True)
        if scaler is not None:
            scaler.scale(loss).backward()
            scaler.unscale_(optimizer)
        else:
            loss.backward()
        if train_config.grad_clip is not None:
            nn.utils.clip_grad_norm_(model.parameters(), train_config.grad_clip)
        if scaler is not None:
            scaler.step(optimizer)
            scaler.update()
        else:
            optimizer.step()
        return totals

    # ------------------------------------------------------------------ bookkeeping

    def _steps_done(self, state: dict[str, Any]) -> bool:
        """Whether ``train.max_steps`` optimizer steps have been taken."""
        max_steps = self.config.train.max_steps
        return max_steps is not None and state["step"] >= max_steps

    def _no_time_for(self, seconds: float) -> bool:
        """Whether ``seconds`` more from now would end past ``train.max_minutes``."""
        budget = self.config.train.max_minutes
        return budget is not None and time.monotonic() - self._started + seconds > budget * 60

    def _mid_epoch_save_due(self, state: dict[str, Any]) -> bool:
        """Whether ``train.checkpoint_every`` asks for a save now (the epoch's end saves anyway)."""
        if state["batch"] >= state["steps_per_epoch"]:
            return False
        every = self.config.train.checkpoint_every
        if every is None:
            return time.monotonic() - self._last_save >= CHECKPOINT_SECONDS
        return bool(state["step"] % every == 0)

    def _save_last(self, parts: _Parts, state: dict[str, Any]) -> None:
        """``last/`` in the middle of an epoch, with what resuming there needs."""
        self._write(parts, state, "last", epoch_rng=parts.epoch_rng)

    def _save_epoch(self, parts: _Parts, state: dict[str, Any], line: dict[str, Any]) -> None:
        """``epoch-E/`` when ``train.keep_epochs`` asks for it, ``best/`` when this epoch is
        the best so far, then ``last/``; then drops epoch checkpoints beyond the last N.

        ``epoch-E`` goes first: a crash before ``last`` re-runs epoch E, which writes it again.
        It keeps the weights only, for averaging (resuming reads ``last``).
        """
        keep = self.config.train.keep_epochs
        if keep:
            weights, _ = self.dist.states(parts.model, None)
            if self.dist.is_main():
                save_checkpoint(
                    epoch_checkpoint(self.run_dir, line["epoch"]),
                    weights,
                    None,
                    None,
                    dict(state),
                    self.config,
                    self.vocabs,
                    spec=getattr(parts.model, "spec", None),
                )
        # A new best is this epoch's `last` too: one save, `best` linked to its files.
        self._write(parts, state, "last", also_best=state["best_epoch"] == line["epoch"])
        if self.dist.is_main():
            prune_epoch_checkpoints(self.run_dir, keep, line["epoch"])

    def _write(
        self,
        parts: _Parts,
        state: dict[str, Any],
        name: str,
        epoch_rng: dict[str, Any] | None = None,
        also_best: bool = False,
    ) -> None:
        weights, optimizer = self.dist.states(parts.model, parts.optimizer)  # FSDP gathers
        if self.dist.is_main():
            save_checkpoint(
                self.run_dir / name,
                weights,
                optimizer,
                parts.scheduler,
                dict(state),
                self.config,
                self.vocabs,
                scaler=parts.scaler,
                epoch_rng_state=epoch_rng,
                spec=getattr(parts.model, "spec", None),
                also=[self.run_dir / "best"] if also_best else [],
            )
        if name == "last":
            self._saved = self._position(state)
            self._last_save = time.monotonic()

    def _position(self, state: dict[str, Any]) -> str:
        """Where the loop stands: ``epoch 2, step 137 of 400``."""
        return f"epoch {state['epoch'] + 1}, step {state['batch']} of {state['steps_per_epoch']}"

    def _opening(self, state: dict[str, Any], *, resumed: bool) -> str:
        """The run's first console line."""
        epochs = self.config.train.epochs
        if not resumed:
            where = str(self.device)
            if self.device.type == "cpu":
                where += f", {plural(torch.get_num_threads(), 'thread')}"
            where += self.dist.describe()
            max_steps = self.config.train.max_steps
            limit = (
                f" (stopping at train.max_steps = {max_steps})"
                if max_steps is not None and max_steps < epochs * state["steps_per_epoch"]
                else ""
            )
            return (
                f"training {self.run_dir}: {plural(epochs, 'epoch')} of "
                f"{plural(state['steps_per_epoch'], 'step')}{limit} on {where}"
            )
        if state["stopped_early"] or state["epoch"] >= epochs:
            why = "stopped early" if state["stopped_early"] else f"train.epochs is {epochs}"
            return (
                f"{self.run_dir} has finished after epoch {state['epoch']} ({why}); nothing to do"
            )
        return f"resuming {self.run_dir} from {self._position(state)} ({epochs} epochs)"
