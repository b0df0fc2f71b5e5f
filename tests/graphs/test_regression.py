"""Regression (one number per set): targets, head, loss and metrics."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch import Tensor, nn

from selfattn.data import Batch, Collator, DataError, Example, LabelVocabulary
from selfattn.models.heads import SequenceRegressor
from selfattn.models.registry import model_options
from selfattn.models.task_model import TaskSpec
from selfattn.tasks import evaluate, regression_loss

from ..helpers_models import build


def _example(label: str, length: int = 3) -> Example:
    return Example(None, np.ones((length, 2), np.float32), label, f"set {label}")


def test_collator_reads_regression_targets_as_floats() -> None:
    collate = Collator(None, None, LabelVocabulary([]), "regression")
    batch = collate([_example("-3.18"), _example("0.5", 5)])
    assert batch.labels.dtype == torch.float32
    torch.testing.assert_close(batch.labels, torch.tensor([-3.18, 0.5]))
    with pytest.raises(DataError, match=r"set high: a regression target must be one number"):
        collate([_example("high")])


def test_regressor_scales_its_standardised_output_back() -> None:
    head = SequenceRegressor(4, target_mean=-2.0, target_std=3.0)
    nn.init.zeros_(head.proj.weight)
    nn.init.constant_(head.proj.bias, 1.0)  # z = 1 → mean + std
    out = head(torch.randn(2, 5, 4), torch.zeros(2, 5, dtype=torch.bool))
    torch.testing.assert_close(out, torch.tensor([1.0, 1.0]))
    with pytest.raises(ValueError, match="target_std must be positive"):
        SequenceRegressor(4, target_std=0.0)


def test_regression_loss_is_in_units_of_the_target_spread() -> None:
    loss = regression_loss(torch.tensor([1.0, 3.0]), torch.tensor([0.0, 0.0]), target_std=2.0)
    assert math.isclose(float(loss), (0.25 + 2.25) / 2)


class _Fixed(nn.Module):
    """Predicts fixed numbers; carries a regression spec like a task model."""

    def __init__(self, predictions: list[float]) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(()))
        self.predictions = torch.tensor(predictions)
        self.spec = TaskSpec(task="regression", num_labels=1, target_std=2.0)

    def forward(self, batch: Batch) -> Tensor:
        return self.predictions[: batch.labels.shape[0]] + self.weight


def test_evaluate_reports_rmse_and_mae_for_a_regression_model() -> None:
    batch = Collator(None, None, LabelVocabulary([]), "regression")(
        [_example("0"), _example("0"), _example("0")]
    )
    metrics = evaluate(_Fixed([1.0, -1.0, 2.0]), [batch])
    assert "accuracy" not in metrics
    assert math.isclose(metrics["rmse"], math.sqrt(6 / 3))
    assert math.isclose(metrics["mae"], 4 / 3)
    assert math.isclose(metrics["loss"], 2 / 4)  # mse / std²
    assert metrics["count"] == 3


def test_a_regression_task_model_returns_one_number_per_set() -> None:
    config = model_options(architecture="graph", embed_dim=8, num_heads=2, ffn_dim=16)
    model = build(
        config, "regression", num_labels=1, feature_dim=2, target_mean=-2.7, target_std=2.0
    )
    assert model.spec is not None and model.spec.target_mean == -2.7
    batch = Collator(None, None, LabelVocabulary([]), "regression")(
        [_example("1"), _example("2", 4)]
    )
    assert model(batch).shape == (2,)
