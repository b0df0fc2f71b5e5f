"""``train.nan_policy`` without training: the epoch's loss sum names the step that made it
not finite (read every step or rarely), skips are counted and too many in a row stop."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from selfattn.config import TrainConfig
from selfattn.config.sections import NanPolicy
from selfattn.train.distributed import StepTotals
from selfattn.train.loop_state import LoopState
from selfattn.train.nan_guard import SKIPS_IN_A_ROW, EpochLoss, NanGuard, NotFinite


def _guard(tmp_path: Path, policy: NanPolicy = "stop", saved: str | None = None) -> NanGuard:
    return NanGuard(tmp_path, TrainConfig(nan_policy=policy), lambda: saved)


def _steps(loss: EpochLoss, state: LoopState, losses: list[float], skipped: bool = False) -> None:
    """Steps as the loop counts them: the batch first, then the step's totals."""
    for value in losses:
        state.batch += 1
        state.step += 1
        loss.add(StepTotals(torch.tensor(value, dtype=torch.float64), 1, 1, skipped))


@pytest.mark.parametrize("every_step", [True, False])
def test_the_loss_sum_names_the_step_that_made_it_not_finite(
    tmp_path: Path, every_step: bool
) -> None:
    state = LoopState(steps_per_epoch=6, epoch=1, step=6, loss_sum=2.0)
    loss = _guard(tmp_path, saved="epoch 2, step 0 of 6").epoch(
        state, torch.device("cpu"), every_step
    )
    _steps(loss, state, [1.0, 0.5])
    loss.read()
    assert state.loss_sum == 3.5  # the sum goes on from the state's
    _steps(loss, state, [math.nan] if every_step else [math.nan, 1.0])
    with pytest.raises(NotFinite) as info:
        loss.read()
    message = str(info.value)
    assert message.startswith("the training loss is nan at epoch 2, step 3 of 6;")
    assert f"--resume goes on from epoch 2, step 0 of 6 ({tmp_path / 'last'})" in message


def test_skips_are_counted_and_too_many_in_a_row_stop(tmp_path: Path) -> None:
    state = LoopState(steps_per_epoch=100)
    loss = _guard(tmp_path, "skip").epoch(state, torch.device("cpu"), every_step=True)
    _steps(loss, state, [0.0] * 3, skipped=True)
    _steps(loss, state, [1.0])
    assert (state.skipped, state.skipped_in_a_row) == (3, 0)
    _steps(loss, state, [0.0] * (SKIPS_IN_A_ROW - 1), skipped=True)
    with pytest.raises(NotFinite) as info:
        _steps(loss, state, [0.0], skipped=True)
    assert str(info.value).startswith(
        f"{SKIPS_IN_A_ROW} steps in a row had a loss that is not finite "
        "(the last at epoch 1, step 14 of 100); training stopped and nothing was saved;"
    )


def test_a_dev_metric_that_is_not_finite_stops_and_blames_the_data_when_all_were_skipped(
    tmp_path: Path,
) -> None:
    guard = _guard(tmp_path, "skip")
    state = LoopState(steps_per_epoch=2, step=2, skipped_in_a_row=2)
    guard.check_dev({"loss": 0.5, "accuracy": 1.0}, state)  # finite: nothing happens
    with pytest.raises(NotFinite, match=r"^the dev loss is inf after epoch 1; .*no update came"):
        guard.check_dev({"accuracy": 1.0, "loss": math.inf}, state)
