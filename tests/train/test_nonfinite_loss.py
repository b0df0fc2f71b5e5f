"""A loss that is not finite never trains on silently: ``train.nan_policy = "stop"`` ends
the run in one line naming the epoch and step (the folder keeps its last checkpoint and
resumes), ``"skip"`` skips such steps, counts them and stops after too many in a row; a
dev loss that is not finite, or weights that are not, are never saved."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import Tensor, nn

from selfattn.tasks import task_named
from selfattn.tasks.task import TASKS
from selfattn.train import TrainResult, load_checkpoint, loop, train
from selfattn.train.nan_guard import SKIPS_IN_A_ROW, NotFinite

from ..tiny_runs import train_config, write_reviews, write_tiny_config
from .test_train_loop import SPEC, VOCAB, _config, _dev_batches, _metrics, _train_batches

pytestmark = pytest.mark.usefixtures("one_thread")


class _Poisoned:
    """The token task's objective, whose loss is nan at the given optimizer steps (from 0)
    and whose dev loss is nan from epoch ``dev_from`` (from 1) on."""

    def __init__(self, config: Any, bad_steps: Iterable[int], dev_from: int | None = None):
        self.task = task_named(SPEC.task, config, SPEC)
        self.bad_steps = set(bad_steps)
        self.dev_from = dev_from
        self.evaluations = 0

    def build(self) -> nn.Module:
        return self.task.build()

    def loss(self, model: Any, batch: Any, step: int) -> Tensor:
        loss = self.task.loss(model, batch, step)
        return loss * math.nan if step in self.bad_steps else loss

    def evaluate(self, model: Any, batches: Any, *, device: Any = None) -> dict[str, float]:
        metrics = self.task.evaluate(model, batches, device=device)
        self.evaluations += 1
        if self.dev_from is not None and self.evaluations >= self.dev_from:
            metrics["loss"] = math.nan
        return metrics


def _run(config: Any, objective: Any, **options: Any) -> TrainResult:
    return train(
        config,
        SPEC,
        _train_batches,
        options.pop("dev_batches", _dev_batches),
        objective=objective,
        vocabs={"tokens": [str(i) for i in range(VOCAB)]},
        progress=False,
        **options,
    )


@pytest.mark.parametrize("reads_are_free", [True, False], ids=["cpu", "reads-cost-a-wait"])
def test_stop_names_the_epoch_and_step_and_keeps_the_run_resumable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, reads_are_free: bool
) -> None:
    # Where reading the loss waits for the device (a GPU), the loop reads it every
    # LOSS_SECONDS and before saving: the step is still named, and nothing of it saved.
    monkeypatch.setattr(loop, "_reads_are_free", lambda device: reads_are_free)
    monkeypatch.setattr(loop, "LOSS_SECONDS", math.inf)
    config = _config(tmp_path / "run")
    with pytest.raises(NotFinite) as info:  # steps 0-5 are epoch 1; step 8 is epoch 2's third
        _run(config, objective=_Poisoned(config, [8]))
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith("the training loss is nan at epoch 2, step 3 of 6;")
    assert "train.lr" in message and 'train.nan_policy = "skip"' in message
    assert f"{config.run_dir / 'last'}" in message
    assert [line["epoch"] for line in _metrics(config.run_dir)] == [1]
    assert load_checkpoint(config.run_dir / "last").state["epoch"] == 1

    resumed = _run(config, objective=_Poisoned(config, []), resume=True)
    assert [line["epoch"] for line in resumed.history] == [1, 2, 3]
    assert all(math.isfinite(line["train_loss"]) for line in resumed.history)


def test_skip_leaves_the_weights_as_they_were_and_counts_the_steps(tmp_path: Path) -> None:
    config = _config(tmp_path / "run", nan_policy="skip")
    result = _run(config, objective=_Poisoned(config, [2, 8, 9]))
    assert [line["skipped_steps"] for line in result.history] == [1, 2, 0]
    assert all(math.isfinite(line["train_loss"]) for line in result.history)
    assert all(torch.isfinite(p).all() for p in result.model.parameters())
    stored = (config.run_dir / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(line)["skipped_steps"] for line in stored] == [1, 2, 0]


def test_skip_stops_after_too_many_in_a_row(tmp_path: Path) -> None:
    config = _config(tmp_path / "run", nan_policy="skip")
    with pytest.raises(NotFinite) as info:
        _run(config, objective=_Poisoned(config, range(4, 100)))
    message = str(info.value)
    assert "\n" not in message
    last = 4 + SKIPS_IN_A_ROW  # the step (from 1) of the tenth skip in a row
    epoch, step = divmod(last - 1, 6)
    assert message.startswith(
        f"{SKIPS_IN_A_ROW} steps in a row had a loss that is not finite "
        f"(the last at epoch {epoch + 1}, step {step + 1} of 6)"
    )


def test_a_dev_loss_that_is_not_finite_is_never_saved_as_best(tmp_path: Path) -> None:
    config = _config(tmp_path / "run")
    with pytest.raises(NotFinite, match=r"^the dev loss is nan after epoch 2;"):
        _run(config, objective=_Poisoned(config, [], dev_from=2))
    assert load_checkpoint(config.run_dir / "best").state["epoch"] == 1
    assert load_checkpoint(config.run_dir / "last").state["epoch"] == 1


def test_weights_that_are_not_finite_are_never_saved(tmp_path: Path) -> None:
    class _Breaks(_Poisoned):
        """At step 5, the last of epoch 1, the loss stays finite and its gradient is nan
        (the slope of sqrt at 0 times 0)."""

        def loss(self, model: Any, batch: Any, step: int) -> Tensor:
            loss = self.task.loss(model, batch, step)
            first = next(model.parameters())
            return loss + torch.sqrt((first * 0).sum()) if step == 5 else loss

    config = _config(tmp_path / "run")
    with pytest.raises(NotFinite, match=r"^the weights are not finite after epoch 1;"):
        _run(config, objective=_Breaks(config, []), dev_batches=None)
    assert not (config.run_dir / "last").exists() and not (config.run_dir / "best").exists()


def test_the_cli_stops_with_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    task = TASKS["sequence"]
    clean = task.loss

    def poisoned(self: Any, model: Any, batch: Any, step: int) -> Tensor:
        loss = clean(self, model, batch, step)
        return loss * math.nan if step == 1 else loss

    monkeypatch.setattr(task, "loss", poisoned)
    config = write_tiny_config(tmp_path, write_reviews(tmp_path / "reviews.csv"))
    assert train_config(config, tmp_path / "run", "train.epochs=1", "data.batch_size=4") == 2
    err = capsys.readouterr().err.splitlines()
    assert err[-1].startswith(
        "selfattn train: error: the training loss is nan at epoch 1, step 2 of "
    ), err


def test_a_loss_that_is_not_finite_before_any_update_blames_the_data(tmp_path: Path) -> None:
    config = _config(tmp_path / "run")
    with pytest.raises(NotFinite) as info:
        _run(config, objective=_Poisoned(config, [0]))
    assert str(info.value) == (
        "the training loss is nan at epoch 1, step 1 of 6; training stopped and nothing was "
        "saved; no update came before it: check the data's numbers and the [model] settings"
    )


@pytest.mark.filterwarnings("error")  # PyTorch's "lr_scheduler.step() before optimizer.step()"
def test_skipping_the_first_step_warns_of_nothing(tmp_path: Path) -> None:
    config = _config(tmp_path / "run", nan_policy="skip", epochs=1)
    result = _run(config, objective=_Poisoned(config, [0]))
    assert result.history[0]["skipped_steps"] == 1
