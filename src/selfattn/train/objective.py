"""What the training loop trains: the one interface it needs from a task.

The loop (:mod:`selfattn.train.loop`) is the same for every task type; an
:class:`Objective` supplies the three task-specific pieces: build the model, the loss of
a batch, and the development metrics (with ``"loss"`` and the checkpoint-selection score,
``"accuracy"`` or a regression's ``"rmse"``). Every :class:`selfattn.tasks.Task` is one.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Protocol

import torch
from torch import Tensor, nn


class Objective(Protocol):
    """The task-specific part of training."""

    def build(self) -> nn.Module:
        """A freshly initialised model."""
        ...

    def loss(self, model: Any, batch: Any, step: int) -> Tensor:
        """The loss of ``batch`` at optimizer step ``step`` (model in training mode)."""
        ...

    def evaluate(
        self, model: Any, batches: Iterable[Any], *, device: torch.device | str | None = None
    ) -> dict[str, float]:
        """Metrics over ``batches``, with ``"loss"``."""
        ...
