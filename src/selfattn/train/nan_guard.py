"""``train.nan_policy``: what a training loss, a dev metric or weights that are nan or ±inf do.

``"stop"`` (the default) ends the run in one line (:class:`NotFinite`) naming what went
bad and where, before anything of it is saved; ``"skip"`` skips the update of a step whose
loss is not finite (:func:`~selfattn.train.step.optimizer_step` does that), counts it, and
stops after :data:`SKIPS_IN_A_ROW` such steps in a row. A dev metric that is not finite
always stops the run; the weights are checked before every save
(:mod:`~selfattn.train.save_rules`).

The loop uses three things: a :class:`NanGuard` for the run, an :class:`EpochLoss` for
each epoch's training-loss sum (``guard.epoch(...)``), and :func:`schedule_step`.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn

import torch
from torch.optim.lr_scheduler import LRScheduler

from selfattn.config import TrainConfig
from selfattn.train.distributed import StepTotals
from selfattn.train.loop_state import LoopState

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


class NanGuard:
    """The run's ``train.nan_policy``.

    Args:
        run_dir: the run folder (named in the message).
        train: the ``[train]`` section (the policy, and what the message advises).
        saved: gives the position of the latest ``last`` when the run stops (``None``:
            nothing saved yet).
    """

    def __init__(self, run_dir: Path, train: TrainConfig, saved: Callable[[], str | None]) -> None:
        self.run_dir = run_dir
        self.train = train
        self.saved = saved
        #: Steps whose loss is not finite are skipped (and counted) rather than stopping.
        self.skip = train.nan_policy == "skip"

    def stop(self, what: str, where: str, *, before_updates: bool = False) -> NoReturn:
        """Stop the run: ``what`` is nan or ±inf ``where``; nothing of it is saved."""
        message = not_finite_message(
            what, where, self.saved(), self.run_dir, self.train, before_updates=before_updates
        )
        raise NotFinite(message)

    def check_dev(self, dev: dict[str, float], state: LoopState) -> None:
        """Stop the run when a dev metric of the epoch just trained is not finite."""
        bad = next((key for key, value in dev.items() if not math.isfinite(value)), None)
        if bad is not None:
            self.stop(
                f"the dev {bad} is {dev[bad]}",
                f"after epoch {state.epoch + 1}",
                before_updates=state.skipped_in_a_row == state.step,  # all skipped
            )

    def epoch(self, state: LoopState, device: torch.device, every_step: bool) -> EpochLoss:
        """The training-loss sum of the epoch ``state`` is in (see :class:`EpochLoss`)."""
        return EpochLoss(self, state, device, every_step)


class EpochLoss:
    """One epoch's training-loss sum, kept on ``device`` and added to in float64 step by
    step as ``state.loss_sum`` was; :meth:`read` copies it into ``state.loss_sum`` (which
    waits for the device) and stops the run when it is not finite.

    A loss that is not finite makes the sum so, and it is caught when the sum is read.
    ``every_step``: the loop reads it after every step (where reads are free, and with
    several processes, who must all stop at the same step); otherwise the device keeps
    the step that made it so (from 1; 0: none yet) to name it.
    """

    def __init__(
        self, guard: NanGuard, state: LoopState, device: torch.device, every_step: bool
    ) -> None:
        self.guard = guard
        self.state = state
        self.every_step = every_step
        self.epoch, self.steps = state.epoch + 1, state.steps_per_epoch
        self.loss_sum = torch.tensor(state.loss_sum, dtype=torch.float64, device=device)
        self.went_bad_at = torch.zeros((), dtype=torch.long, device=device)

    def add(self, totals: StepTotals) -> None:
        """Count the step just taken (``state.batch`` already counts it): its loss, and
        with ``train.nan_policy = "skip"`` whether it was skipped; too many skips in a
        row stop the run."""
        state = self.state
        if self.guard.skip:
            state.skipped += totals.skipped
            state.skipped_in_a_row = state.skipped_in_a_row + 1 if totals.skipped else 0
            if state.skipped_in_a_row >= SKIPS_IN_A_ROW:
                self.guard.stop(
                    f"{SKIPS_IN_A_ROW} steps in a row had a loss that is not finite",
                    f"(the last at epoch {self.epoch}, step {state.batch} of {self.steps})",
                )
        self.loss_sum = self.loss_sum + totals.loss_sum
        if not self.every_step:
            went_bad = (self.went_bad_at == 0) & ~torch.isfinite(self.loss_sum)
            self.went_bad_at = torch.where(went_bad, state.batch, self.went_bad_at)

    def read(self) -> None:
        """Copy the sum into ``state.loss_sum``; stop the run when it is not finite."""
        state = self.state
        state.loss_sum = float(self.loss_sum)
        if not math.isfinite(state.loss_sum):
            step = state.batch if self.every_step else int(self.went_bad_at)
            self.guard.stop(
                f"the training loss is {state.loss_sum}",
                f"at epoch {self.epoch}, step {step} of {self.steps}",
                before_updates=self.epoch == 1 and step == 1,
            )


def schedule_step(scheduler: LRScheduler, *, skipped: bool) -> None:
    """Advance the learning-rate schedule (a step skipped for its loss still counts)."""
    if not skipped:
        scheduler.step()
        return
    with warnings.catch_warnings():
        # PyTorch's warning that the schedule moved before the optimizer's first step:
        # when that step was skipped, it did so on purpose.
        warnings.filterwarnings("ignore", "Detected call of `lr_scheduler.step")
        scheduler.step()
