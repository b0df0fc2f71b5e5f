"""When training stops before ``train.epochs``: early stopping (``train.patience``), a step
count (``train.max_steps``), a wall-clock budget (``train.max_minutes``), and Ctrl-C or
SIGTERM (:class:`TrainingInterrupted`).

The rules are plain functions of the loop's state and of the times the loop reads from
its one clock, so that they are tested without training.
"""

from __future__ import annotations

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
    ``train_loss``; ties keep the earlier epoch."""
    score = selection_score(dev) if dev is not None else -train_loss
    improved = state.best_score is None or score > state.best_score
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
