"""The ``token`` task type: a label per vector (POS tags, a graph's node classes); its
data road, model and loss are :class:`~selfattn.tasks.labelling.LabelTask`'s."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from selfattn.data import Example
from selfattn.tasks.labelling import LabelTask
from selfattn.tasks.task import positions, register_task


@register_task
class TokenTask(LabelTask):
    """A label per vector (POS tags, a graph's node classes)."""

    name = "token"
    layout = "token"
    accepts = frozenset({"vectors"})

    def predict(self, model: nn.Module, example: Example, **options: Any) -> str:
        """``token/TAG`` per token."""
        return " ".join(f"{token}/{tag}" for token, tag, _ in self.tags(model, example, **options))

    def tags(
        self, model: nn.Module, example: Example, **options: Any
    ) -> list[tuple[str, str, float]]:
        """``(token, tag, p)`` per token."""
        self.check_options(options)
        best = torch.softmax(self.logits(model, example), dim=-1).max(dim=-1)
        return [
            (token, self.labels.decode(int(i)), float(p))
            for token, i, p in zip(positions(example), best.indices, best.values, strict=True)
        ]
