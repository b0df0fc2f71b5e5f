"""When training stops before ``train.epochs``: early stopping (``train.patience``), a step
count (``train.max_steps``), a wall-clock budget (``train.max_minutes``), Ctrl-C or
SIGTERM (:class:`TrainingInterrupted`). A loss, dev loss or weights that are not finite
stop it too (:mod:`~selfattn.train.nan_guard`).

The rules are plain functions of the loop's state and of the times the loop reads from
its one clock, so that they are tested without training.
"""

from __future__ import annotations

import math
from pathlib import Path

from selfattn.train.loop_state import LoopState


class TrainingInterrupted(KeyboardInterrupt):
    """Ctrl-C or SIGTERM stopped training; ``last`` holds a checkpoint to resume from.

    Attributes:
        checkpoint: the folder of that checkpoint (``run_dir/last``).
    """

    def __init__(self, message: str, checkpoint: Path) -> None:
        super().__init__(message)
        self.checkpoint = checkpoint


def interrupted(where: str | None, run_dir: Path, saved: str | None = None) -> TrainingInterrupted:
    """Ctrl-C or SIGTERM stopped the run ``where`` (``"after epoch 1 of 3"``), just after
    ``run_dir/last`` was saved; ``None``: at once, ``last`` holding ``saved``."""
    last = run_dir / "last"
    if where is None:
        return TrainingInterrupted(
            f"interrupted at once; the last checkpoint ({saved}) is in {last}", last
        )
    return TrainingInterrupted(f"interrupted {where}; checkpoint saved in {last}", last)


class OutOfTime(Exception):
    """``train.max_minutes`` passed within an epoch; ``last`` was saved at that step."""


def selection_score(dev: dict[str, float]) -> float:
    """What chooses the best epoch from dev metrics: a label set's F1, else accuracy,
    else (regression) minus the loss."""
    for metric in ("set_f1", "accuracy"):
        if metric in dev:
            return dev[metric]
    return -dev["loss"]


def record_epoch(
    state: LoopState, dev: dict[str, float] | None, train_loss: float, patience: int | None
) -> None:
    """Count the epoch just finished in ``state``: its best epoch, the epochs since, and
    whether ``patience`` epochs without a better score end the run. The score is the
    :func:`selection_score` of the ``dev`` metrics, without a dev set minus the
    ``train_loss``; ties keep the earlier epoch, and a score that is not finite never
    becomes the best."""
    score = selection_score(dev) if dev is not None else -train_loss
    # A score that is not finite is never the best (nan compares false, -inf is no score).
    improved = math.isfinite(score) and (state.best_score is None or score > state.best_score)
    state.epoch += 1
    if improved:
        state.best_score, state.best_epoch, state.bad_epochs = score, state.epoch, 0
    else:
        state.bad_epochs += 1
    state.stopped_early = patience is not None and state.bad_epochs >= patience


def steps_done(state: LoopState, max_steps: int | None) -> bool:
    """Whether ``train.max_steps`` optimizer steps have been taken."""
    return max_steps is not None and state.step >= max_steps


class TimeBudget:
    """``train.max_minutes`` of wall-clock time from when this process began its epochs.

    Args:
        max_minutes: the budget; ``None``: none.
        started: ``time.monotonic()`` when the epochs began.
    """

    def __init__(self, max_minutes: float | None, started: float) -> None:
        self.max_minutes = max_minutes
        self.started = started

    def no_time_for(self, seconds: float, now: float) -> bool:
        """Whether ``seconds`` more from ``now`` would end past the budget."""
        budget = self.max_minutes
        return budget is not None and now - self.started + seconds > budget * 60

    def epoch_refused(self, epoch: int, seconds: float, run_dir: Path) -> str:
        """The console's line when epoch ``epoch + 1`` (about ``seconds`` long) would pass
        the budget."""
        return (
            f"stopping after epoch {epoch}: another epoch (~{seconds:.0f} s) would "
            f"pass train.max_minutes = {self.max_minutes:g}; "
            f"--resume goes on from {run_dir / 'last'}"
        )

    def passed(self, saved: str | None, run_dir: Path) -> str:
        """The console's line when the budget passed within an epoch, ``last`` saved at
        ``saved``."""
        return (
            f"train.max_minutes = {self.max_minutes:g} passed at "
            f"{saved} (that epoch is not scored); --resume goes on from "
            f"{run_dir / 'last'}"
        )
