"""The ``sequence`` task type: a label per set (sentiment, speaker, an image's class, a
molecule's class); its data road, model and loss are
:class:`~selfattn.tasks.labelling.LabelTask`'s."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from selfattn.data import Example
from selfattn.tasks.labelling import LabelTask
from selfattn.tasks.task import register_task


@register_task
class SequenceTask(LabelTask):
    """A label per set (sentiment, speaker, an image's class, a molecule's class)."""

    name = "sequence"
    layout = "sequence"
    accepts = frozenset({"vectors", "image_vectors", "answer"})

    def predict(self, model: nn.Module, example: Example, **options: Any) -> str:
        """The best label, then every label with its probability."""
        ranked = self.ranked(model, example, **options)
        listing = ", ".join(f"{label} {p:.3f}" for label, p in ranked)
        return f"{ranked[0][0]}\t({listing})"

    def ranked(self, model: nn.Module, example: Example, **options: Any) -> list[tuple[str, float]]:
        """``(label, p)`` from the likeliest down."""
        self.check_options(options)
        probs = torch.softmax(self.logits(model, example), dim=-1)
        return [
            (self.labels.decode(int(i)), float(probs[i])) for i in probs.argsort(descending=True)
        ]
