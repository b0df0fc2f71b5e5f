"""``eval_batches``: the batches every evaluation reads, with the model in eval mode
meanwhile and its former mode put back after."""

from __future__ import annotations

import torch
from torch import nn

from selfattn.tasks.metrics import eval_batches


class _Batch:
    def __init__(self) -> None:
        self.device: torch.device | None = None

    def to(self, device: torch.device | str) -> _Batch:
        self.device = torch.device(device)
        return self


def test_eval_mode_while_reading_and_the_former_mode_after() -> None:
    model = nn.Linear(2, 2)
    for training in (True, False):
        model.train(training)
        modes = [(model.training, batch.device) for batch in eval_batches(model, [_Batch()] * 2)]
        assert modes == [(False, torch.device("cpu"))] * 2
        assert model.training is training
    model.train()
    assert list(eval_batches(model, [])) == [] and model.training


def test_an_evaluation_stopped_early_still_puts_the_mode_back() -> None:
    model = nn.Linear(2, 2).train()
    batches = eval_batches(model, [_Batch()], "cpu")
    next(batches)
    batches.close()
    assert model.training
