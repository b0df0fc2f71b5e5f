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
dev loss; without a dev set, the lowest training loss). ``resume=True`` continues from
``run_dir/last/`` with weights, optimizer, schedule, RNG states and counters restored, and
ends in exactly the state an uninterrupted run reaches (on the CPU; CUDA kernels need not
be deterministic).
"""

from __future__ import annotations

import contextlib
import json
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
from tqdm import tqdm

from selfattn.tasks.model import TaskSpec
from selfattn.train.checkpoint import (
    load_checkpoint,
    save_checkpoint,
    set_rng_state,
    write_atomic,
)
from selfattn.train.config import Config, config_to_dict, config_to_toml
from selfattn.train.objectives import objective_for
from selfattn.train.optim import WarmupDecay, build_optimizer, build_scheduler

TrainBatches = Callable[[int], Iterable[Any]]
DevBatches = Callable[[], Iterable[Any]]

METRICS_FILE = "metrics.jsonl"
#: Fields of a metrics line that measure the machine, not the model (they differ run to run).
TIMING_KEYS = ("tokens_per_s", "seconds")


@dataclass
class TrainResult:
    """What :func:`train` returns.

    Attributes:
        model: the model after the last epoch run (the best one is in ``run_dir/best``).
        history: every epoch's metrics line, including those before a resume.
        best: the metrics line of the best epoch (``None`` if no epoch ran).
        stopped_early: training stopped for lack of improvement (``patience``).
        run_dir: where checkpoints and metrics are.
    """

    model: nn.Module
    history: list[dict[str, Any]]
    best: dict[str, Any] | None
    stopped_early: bool
    run_dir: Path


def train(
    config: Config,
    spec: TaskSpec,
    train_batches: TrainBatches,
    dev_batches: DevBatches | None = None,
    *,
    vocabs: dict[str, Any] | None = None,
    resume: bool = False,
    overwrite: bool = False,
    progress: bool = True,
) -> TrainResult:
    """Train the model of ``config.model`` for ``spec``; see :class:`Trainer`."""
    trainer = Trainer(config, spec, train_batches, dev_batches, vocabs=vocabs, progress=progress)
    return trainer.run(resume=resume, overwrite=overwrite)


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
        vocabs: JSON-ready vocabularies to store in checkpoints.
        progress: show a tqdm bar (loss, tokens/s, ETA) on stderr.
    """

    def __init__(
        self,
        config: Config,
        spec: TaskSpec,
        train_batches: TrainBatches,
        dev_batches: DevBatches | None = None,
        *,
        vocabs: dict[str, Any] | None = None,
        progress: bool = True,
    ) -> None:
        self.config = config
        self.spec = spec
        self.train_batches = train_batches
        self.dev_batches = dev_batches
        self.vocabs = vocabs or {}
        self.progress = progress
        self.objective = objective_for(config, spec)
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

    # ------------------------------------------------------------------ the run

    def run(self, *, resume: bool = False, overwrite: bool = False) -> TrainResult:
        """Train to ``config.train.epochs`` (or early stopping) and return the result.

        Args:
            resume: continue the run in ``run_dir`` from ``run_dir/last``.
            overwrite: start afresh even though ``run_dir`` holds a run.

        Raises:
            ValueError: ``run_dir`` already holds a run (and neither flag is set); nothing
                to resume; a checkpoint for a different model.
        """
        train_config = self.config.train
        self.run_dir.mkdir(parents=True, exist_ok=True)
        metrics_path = self.run_dir / METRICS_FILE
        if not resume:
            self._claim_run_dir(overwrite)
        if train_config.threads is not None:
            torch.set_num_threads(train_config.threads)
        seed_everything(train_config.seed)
        model = self.objective.build().to(self.device)
        optimizer = build_optimizer(model, train_config)
        scaler = (
            torch.amp.GradScaler("cuda") if self.amp_dtype is torch.float16 else None
        )  # bf16 needs no loss scaling
        first_epoch: Iterable[Any] | None = None
        if resume:
            checkpoint = load_checkpoint(self.run_dir / "last", map_location=self.device)
            self._check_compatible(checkpoint.config, checkpoint.spec)
            state = dict(checkpoint.state)
        else:
            first_epoch = self.train_batches(0)
            if not isinstance(first_epoch, Sized):
                first_epoch = list(first_epoch)
            state = {
                "epoch": 0,
                "step": 0,
                "steps_per_epoch": len(first_epoch),
                "best_score": None,
                "best_epoch": None,
                "bad_epochs": 0,
                "stopped_early": False,
            }
        total_steps = state["steps_per_epoch"] * train_config.epochs
        scheduler = build_scheduler(optimizer, train_config, total_steps)
        history: list[dict[str, Any]] = []
        if resume:
            model.load_state_dict(checkpoint.model_state)
            if checkpoint.optimizer_state is not None:
                optimizer.load_state_dict(checkpoint.optimizer_state)
            if checkpoint.scheduler_state is not None:
                scheduler.load_state_dict(checkpoint.scheduler_state)
                # A resumed run may have been given more epochs: stretch the decay to them.
                schedule = scheduler.lr_lambdas[0]
                assert isinstance(schedule, WarmupDecay)
                schedule.total_steps = max(total_steps, 1)
            if scaler is not None and checkpoint.scaler_state is not None:
                scaler.load_state_dict(checkpoint.scaler_state)
            set_rng_state(checkpoint.rng_state)
            history = _truncate_metrics(metrics_path, state["epoch"])
        else:
            write_atomic(self.run_dir / "config.toml", config_to_toml(self.config).encode())

        bar = tqdm(
            total=total_steps,
            initial=state["step"],
            disable=not self.progress,
            unit="step",
            dynamic_ncols=True,
        )
        with bar:
            for epoch in range(state["epoch"], train_config.epochs):
                if state["stopped_early"]:
                    break
                batches = first_epoch if epoch == 0 and first_epoch is not None else None
                if batches is None:
                    batches = self.train_batches(epoch)
                line = self._epoch(model, optimizer, scheduler, scaler, batches, state, bar)
                history.append(line)
                # Metrics first: a crash before `last` is saved re-runs this epoch, and the
                # resumed run drops the lines of epochs later than its checkpoint.
                _append_line(metrics_path, line)
                self._save(model, optimizer, scheduler, scaler, state, line)
        best = next((h for h in history if h["epoch"] == state["best_epoch"]), None)
        return TrainResult(model, history, best, bool(state["stopped_early"]), self.run_dir)

    # ------------------------------------------------------------------ one epoch

    def _epoch(
        self,
        model: nn.Module,
        optimizer: torch.optim.Optimizer,
        scheduler: torch.optim.lr_scheduler.LambdaLR,
        scaler: torch.amp.GradScaler | None,
        batches: Iterable[Any],
        state: dict[str, Any],
        bar: tqdm,
    ) -> dict[str, Any]:
        """Train one epoch, evaluate, update ``state``; returns the epoch's metrics line."""
        started = time.perf_counter()
        epoch = state["epoch"] + 1
        loss_sum, units, tokens = 0.0, 0, 0
        model.train()
        for batch in batches:
            batch = batch.to(self.device)
            loss = self._step(model, optimizer, scaler, batch, state["step"])
            scheduler.step()
            state["step"] += 1
            n = int((batch.labels != -100).sum())
            loss_sum, units, tokens = loss_sum + loss * n, units + n, tokens + batch.num_tokens
            rate = tokens / max(time.perf_counter() - started, 1e-9)
            bar.update(1)
            bar.set_postfix(
                epoch=epoch, loss=f"{loss_sum / max(units, 1):.4f}", tok_s=f"{rate:.0f}"
            )
        train_seconds = time.perf_counter() - started
        line: dict[str, Any] = {
            "epoch": epoch,
            "step": state["step"],
            "train_loss": loss_sum / max(units, 1),
            "lr": scheduler.get_last_lr()[0],
        }
        if self.dev_batches is not None:
            dev = self.objective.evaluate(model, self.dev_batches(), device=self.device)
            line.update({f"dev_{key}": value for key, value in dev.items()})
            score = dev["accuracy"] if "accuracy" in dev else -dev["loss"]  # regression
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
        line["tokens_per_s"] = tokens / max(train_seconds, 1e-9)
        line["seconds"] = time.perf_counter() - started
        return line

    def _step(
        self,
        model: nn.Module,
        optimizer: torch.optim.Optimizer,
        scaler: torch.amp.GradScaler | None,
        batch: Any,
        step: int,
    ) -> float:
        """One optimizer step on ``batch``; returns its (smoothed) loss."""
        train_config = self.config.train
        autocast = (
            torch.autocast("cuda", dtype=self.amp_dtype)
            if self.amp_dtype is not None
            else contextlib.nullcontext()
        )
        with autocast:
            loss = self.objective.loss(model, batch, step)
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
        return float(loss.detach())

    # ------------------------------------------------------------------ bookkeeping

    def _save(
        self,
        model: nn.Module,
        optimizer: torch.optim.Optimizer,
        scheduler: torch.optim.lr_scheduler.LambdaLR,
        scaler: torch.amp.GradScaler | None,
        state: dict[str, Any],
        line: dict[str, Any],
    ) -> None:
        """``best/`` when this epoch is the best so far, then ``last/``."""
        targets = ["best"] if state["best_epoch"] == line["epoch"] else []
        for name in [*targets, "last"]:
            save_checkpoint(
                self.run_dir / name,
                model,
                optimizer,
                scheduler,
                dict(state),
                self.config,
                self.vocabs,
                scaler=scaler,
            )

    def _claim_run_dir(self, overwrite: bool) -> None:
        """Refuse to start over a previous run unless told to; then clear its metrics."""
        metrics_path = self.run_dir / METRICS_FILE
        taken = (self.run_dir / "last").exists() or metrics_path.exists()
        if taken and not overwrite:
            raise ValueError(
                f"{self.run_dir} already holds a run; resume it or choose another run_dir "
                "(or overwrite it)"
            )
        metrics_path.unlink(missing_ok=True)

    def _check_compatible(self, stored: Config, spec: TaskSpec | None) -> None:
        """A resumed run must build the same model; other changes only warn."""
        same_model = stored.model == self.config.model and stored.seq2seq == self.config.seq2seq
        if not same_model or spec != self.spec:
            raise ValueError(
                f"{self.run_dir / 'last'} holds a different model (model config or task "
                "spec differ); resume with the configuration it was started with"
            )
        now, then = config_to_dict(self.config), config_to_dict(stored)
        changed = [
            f"{section}.{key}"
            for section in ("data", "train")
            for key in now[section]
            if now[section][key] != then[section].get(key)
        ]
        if changed:
            warnings.warn(
                f"resuming with changed settings {', '.join(changed)}: the run will not "
                "match an uninterrupted one",
                stacklevel=3,
            )


def _append_line(path: Path, line: dict[str, Any]) -> None:
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(line) + "\n")
        f.flush()


def _truncate_metrics(path: Path, epochs: int) -> list[dict[str, Any]]:
    """Keep the metrics of the first ``epochs`` epochs (later ones belong to lost work)."""
    lines = list(_read_lines(path))
    kept = [line for line in lines if line.get("epoch", 0) <= epochs]
    if len(kept) != len(lines):
        write_atomic(path, "".join(json.dumps(line) + "\n" for line in kept).encode())
    return kept


def _read_lines(path: Path) -> Iterator[dict[str, Any]]:
    if not path.exists():
        return
    for text in path.read_text(encoding="utf-8").splitlines():
        with contextlib.suppress(json.JSONDecodeError):  # a line cut short by a crash
            yield json.loads(text)
