"""When the loop saves and what each save writes, without training."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
import torch
from torch import nn

from selfattn.train import build_optimizer, build_scheduler, load_checkpoint
from selfattn.train.distributed import Distributed, World
from selfattn.train.loop_state import LoopState, Parts
from selfattn.train.rng import get_rng_state
from selfattn.train.save_rules import CHECKPOINT_SECONDS, Saves, mid_epoch_save_due

from .test_train_checkpoint import CONFIG, VOCABS


@pytest.mark.parametrize(
    ("step", "batch", "every", "since", "due"),
    [
        (6, 2, 3, 0.0, True),  # every 3 steps of the run, whatever the epoch's batch
        (7, 3, 3, 1e9, False),
        (4, 4, 2, 0.0, False),  # the epoch's last batch: its end saves anyway
        (5, 1, None, CHECKPOINT_SECONDS, True),  # no count: every CHECKPOINT_SECONDS
        (5, 1, None, CHECKPOINT_SECONDS - 0.1, False),
        (4, 4, None, 1e9, False),
    ],
)
def test_a_save_within_an_epoch_is_due_by_steps_or_by_time(
    step: int, batch: int, every: int | None, since: float, due: bool
) -> None:
    state = LoopState(steps_per_epoch=4, step=step, batch=batch)
    assert mid_epoch_save_due(state, every, since) is due


class _Clock:
    def __init__(self) -> None:
        self.now = 10.0

    def __call__(self) -> float:
        self.now += 1.0
        return self.now


def _saves(run_dir: Path, keep_epochs: int) -> tuple[Saves, Parts, _Clock]:
    config = replace(CONFIG, train=replace(CONFIG.train, keep_epochs=keep_epochs))
    model = nn.Linear(3, 2)
    optimizer = build_optimizer(model, config.train)
    scheduler = build_scheduler(optimizer, config.train, total_steps=10)
    parts = Parts(model, optimizer, scheduler, None, lambda batch, step: torch.zeros(()))
    clock = _Clock()
    return Saves(run_dir, config, VOCABS, Distributed(World()), clock), parts, clock


def test_a_save_within_an_epoch_writes_last_with_the_epochs_rng(tmp_path: Path) -> None:
    saves, parts, clock = _saves(tmp_path, keep_epochs=0)
    parts.epoch_rng = get_rng_state()
    assert saves.saved is None
    state = LoopState(epoch=1, step=7, steps_per_epoch=4, batch=3, loss_sum=2.5, units=5)
    saves.within_epoch(parts, state)
    assert (saves.saved, saves.saved_at) == ("epoch 2, step 3 of 4", clock.now)
    last = load_checkpoint(tmp_path / "last")
    assert LoopState.from_dict(last.state) == state
    assert last.epoch_rng_state is not None and last.optimizer_state is not None
    assert sorted(path.name for path in tmp_path.iterdir()) == ["last"]


def test_an_epochs_end_writes_last_best_when_best_and_the_last_n_epochs(
    tmp_path: Path,
) -> None:
    saves, parts, _ = _saves(tmp_path, keep_epochs=2)
    state = LoopState(steps_per_epoch=4)
    folders = []
    for epoch, best in [(1, 1), (2, 2), (3, 2), (4, 2)]:
        state.epoch, state.step, state.best_epoch = epoch, 4 * epoch, best
        saves.epoch_end(parts, state)
        folders.append(sorted(path.name for path in tmp_path.iterdir()))
        assert saves.saved == f"epoch {epoch + 1}, step 0 of 4"
    assert folders == [
        ["best", "epoch-1", "last"],
        ["best", "epoch-1", "epoch-2", "last"],
        ["best", "epoch-2", "epoch-3", "last"],
        ["best", "epoch-3", "epoch-4", "last"],
    ]
    assert load_checkpoint(tmp_path / "best").state["epoch"] == 2  # not rewritten since
    assert load_checkpoint(tmp_path / "last").state["epoch"] == 4
    kept = load_checkpoint(tmp_path / "epoch-4")
    assert kept.optimizer_state is None and kept.epoch_rng_state is None  # weights only
