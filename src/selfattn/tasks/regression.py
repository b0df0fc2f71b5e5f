"""The ``regression`` task type: a number per set (a molecule's solubility), learned in
units of the training targets' spread; its data road and model are
:class:`~selfattn.tasks.labelling.LabelTask`'s."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import torch
from torch import Tensor, nn

from selfattn.data import Example
from selfattn.tasks.labelling import LabelTask
from selfattn.tasks.metrics import evaluate_regression, regression_loss
from selfattn.tasks.task import register_task


@register_task
class RegressionTask(LabelTask):
    """A number per set (a molecule's solubility)."""

    name = "regression"
    layout = "regression"
    accepts = frozenset({"vectors"})

    def loss_of(self, batch: Any) -> Callable[[Tensor], Tensor]:
        """:func:`regression_loss` of the predicted values."""
        assert self.spec is not None
        std = self.spec.target_std
        return lambda values: regression_loss(values, batch.labels, std)

    def evaluate(
        self, model: Any, batches: Iterable[Any], *, device: torch.device | str | None = None
    ) -> dict[str, float]:
        return evaluate_regression(model, batches, device=device)

    def predict(self, model: nn.Module, example: Example, **options: Any) -> str:
        """The predicted value, in the targets' units."""
        return f"{self.value(model, example, **options):.4f}"

    def value(self, model: nn.Module, example: Example, **options: Any) -> float:
        """The prediction for ``example``, in the targets' units."""
        self.check_options(options)
        return float(self.logits(model, example))
