"""When training stops before ``train.epochs``: early stopping (``train.patience``), a step
count (``train.max_steps``), a wall-clock budget (``train.max_minutes``), Ctrl-C or
SIGTERM (:class:`TrainingInterrupted`), and a loss, dev loss or weights that are not
finite (:class:`NotFinite`, ``train.nan_policy``).

The rules are plain functions of the loop's state and of the times the loop reads from
its one clock, so that they are tested without training.
"""

from __future__ import annotations

import math
from pathlib import Path

from selfattn.config import TrainConfig
from selfattn.train.loop_state import LoopState


class TrainingInterrupted(KeyboardInterrupt):
    """Ctrl-C or SIGTERM stopped training; ``last`` holds a checkpoint to resume from.

    Attributes:
        checkpoint: the folder of that checkpoint (``run_dir/last``).
    """

    def __init__(self, message: str, checkpoint: Path) -> None:
        super().__init__(message)
        self.checkpoint = checkpoint


#: ``train.nan_policy = "skip"``: this many skipped steps in a row stop the run anyway (the
#: weights themselves have most likely gone bad, and every later step would be skipped).
SKIPS_IN_A_ROW = 10


class NotFinite(ValueError):
    """A training loss, a dev metric or the weights are nan or ±inf: the run stops, and
    nothing computed after the latest checkpoint of ``last`` is saved."""


def not_finite_message(
    what: str,
    where: str,
    saved: str | None,
    run_dir: Path,
    train: TrainConfig,
    *,
    before_updates: bool = False,
) -> str:
    """The one line a :class:`NotFinite` says: ``what`` went wrong ``where``, what the run
    folder keeps (``saved``: the position of the latest ``last``, ``None``: nothing) and
    what in ``train`` to change; ``before_updates``: no update preceded it, so the
    learning rate is not the cause."""
    kept = (
        f"--resume goes on from {saved} ({run_dir / 'last'})"
        if saved is not None
        else "nothing was saved"
    )
    if before_updates:
        advice = "no update came before it: check the data's numbers and the [model] settings"
        return f"{what} {where}; training stopped and {kept}; {advice}"
    changes = [f"lower train.lr (it is {train.lr:g})"]
    if train.grad_clip is None:
        changes.append("set train.grad_clip")
    if train.nan_policy == "stop" and what.startswith("the training loss"):
        changes.append('skip such steps with train.nan_policy = "skip"')
    advice = ", ".join(changes[:-1]) + " or " + changes[-1] if len(changes) > 1 else changes[0]
    return f"{what} {where}; training stopped and {kept}; {advice}"


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
