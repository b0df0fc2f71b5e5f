"""The rules that end training before ``train.epochs``, as plain functions."""

from __future__ import annotations

import pytest

from selfattn.train.loop_state import LoopState
from selfattn.train.stop_rules import TimeBudget, record_epoch, selection_score, steps_done


def test_the_selection_score_is_set_f1_then_accuracy_then_minus_the_loss() -> None:
    assert selection_score({"set_f1": 0.5, "accuracy": 0.9, "loss": 1.0}) == 0.5
    assert selection_score({"accuracy": 0.9, "loss": 1.0}) == 0.9
    assert selection_score({"loss": 1.0, "rmse": 2.0}) == -1.0


def test_record_epoch_keeps_the_best_and_ties_keep_the_earlier() -> None:
    state = LoopState(steps_per_epoch=4)
    scores = [0.5, 0.7, 0.7, 0.6, 0.8]
    seen = []
    for score in scores:
        record_epoch(state, {"accuracy": score, "loss": 0.0}, 9.0, patience=None)
        seen.append((state.epoch, state.best_epoch, state.bad_epochs, state.stopped_early))
    # (epochs, best epoch, epochs since, stopped)
    expected = [(1, 1, 0, False), (2, 2, 0, False), (3, 2, 1, False), (4, 2, 2, False)]
    assert seen == [*expected, (5, 5, 0, False)]
    assert state.best_score == 0.8


def test_patience_stops_after_that_many_epochs_without_a_better_score() -> None:
    state = LoopState(steps_per_epoch=4)
    for loss in (1.0, 0.5, 0.6, 0.7):  # no dev set: the training loss decides
        assert not state.stopped_early
        record_epoch(state, None, loss, patience=2)
    assert state.stopped_early and state.best_epoch == 2 and state.best_score == -0.5
    assert (state.epoch, state.bad_epochs) == (4, 2)


@pytest.mark.parametrize(
    ("step", "max_steps", "done"),
    [(0, None, False), (10**9, None, False), (4, 5, False), (5, 5, True), (6, 5, True)],
)
def test_max_steps_counts_the_runs_optimizer_steps(
    step: int, max_steps: int | None, done: bool
) -> None:
    assert steps_done(LoopState(steps_per_epoch=3, step=step), max_steps) is done


def test_the_time_budget_counts_from_the_start_of_the_epochs() -> None:
    budget = TimeBudget(max_minutes=2.5, started=100.0)  # 150 s: ends at 250
    assert not budget.no_time_for(0.0, now=100.0)
    assert not budget.no_time_for(60.0, now=190.0)  # would end at exactly 250
    assert budget.no_time_for(60.0, now=190.5)
    assert budget.no_time_for(0.0, now=250.5)
    assert not TimeBudget(None, started=0.0).no_time_for(1e9, now=1e9)
