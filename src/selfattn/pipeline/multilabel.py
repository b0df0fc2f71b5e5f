"""The ``multilabel`` task type: a set of labels per input, of any size (lecture 001,
"the machine decides how many labels").

The model is a label task's (:class:`~selfattn.tasks.TaskModel`: an input embedding, an
encoder, ``model.pooling``) with one logit per label; each label is a yes/no question,
learned with a binary cross-entropy (:func:`~selfattn.pipeline.set_metrics.label_set_loss`),
and the predicted set holds the labels with sigmoid probability ≥ 0.5 — possibly none.
Metrics are set F1, micro F1 and exact set match (:mod:`~selfattn.pipeline.set_metrics`);
checkpoints are chosen by dev set F1.

The other form of the lecture — a seq2seq model writing the set as a sequence — is the
``seq2seq`` task on the same data (``data.task = "seq2seq"``:
:func:`~selfattn.data.readers.label_sets.label_set_targets`), scored by the same numbers.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any

import torch
from torch import Tensor

from selfattn.data import Example
from selfattn.data.specials import NO_LABELS
from selfattn.models.act import PonderMeter, ponder_penalty
from selfattn.pipeline.labelling import LabelTask
from selfattn.pipeline.set_metrics import THRESHOLD, SetScores, label_set_loss, predicted_sets
from selfattn.pipeline.task import register_task

__all__ = ["MultiLabelTask"]


@register_task
class MultiLabelTask(LabelTask):
    """A set of labels per input (module docstring)."""

    name = "multilabel"

    def loss(self, model: Any, batch: Any, step: int) -> Tensor:
        """:func:`label_set_loss` of ``model(batch)`` (with ``train.label_smoothing``)."""
        loss = label_set_loss(model(batch), batch.labels, self.config.train.label_smoothing)
        return loss + ponder_penalty(getattr(model, "module", model))

    @torch.no_grad()
    def evaluate(
        self, model: Any, batches: Iterable[Any], *, device: torch.device | str | None = None
    ) -> dict[str, float]:
        """Mean binary cross-entropy per (example, label), ``set_f1`` (what chooses the
        best epoch), ``micro_f1``, ``exact_match`` and ``count`` (examples)."""
        if device is None:
            device = next(model.parameters()).device
        was_training = model.training
        model.eval()
        scores, loss_sum = SetScores(), 0.0
        ponder = PonderMeter(model)
        names = self.labels.labels
        for batch in batches:
            batch = batch.to(device)
            logits = model(batch).float()  # (B, C)
            ponder.add()
            loss_sum += float(label_set_loss(logits, batch.labels)) * len(logits)
            chosen = predicted_sets(logits)
            for row, gold in zip(chosen.tolist(), batch.labels.bool().tolist(), strict=True):
                scores.add(
                    (n for n, yes in zip(names, row, strict=True) if yes),
                    (n for n, yes in zip(names, gold, strict=True) if yes),
                )
        model.train(was_training)
        metrics = scores.metrics()
        return {"loss": loss_sum / max(metrics["count"], 1), **metrics, **ponder.metrics()}

    def unlabelled(self, example: Example) -> Example:
        """``example`` with the empty set as its stand-in label."""
        return dataclasses.replace(example, label=())

    def predict(self, model: Any, example: Example, **options: Any) -> str:
        """The predicted set, comma-separated (``<none>`` when empty), then every label
        with its probability: ``modal,past\\t(past 0.981, modal 0.907, number 0.120, …)``."""
        ranked = self.ranked(model, example, **options)
        chosen = [label for label, p in ranked if p >= THRESHOLD]
        listing = ", ".join(f"{label} {p:.3f}" for label, p in ranked)
        return f"{','.join(chosen) or NO_LABELS}\t({listing})"

    def ranked(self, model: Any, example: Example, **options: Any) -> list[tuple[str, float]]:
        """``(label, p)`` for every label, likeliest first (each p on its own: they need
        not sum to 1)."""
        self.check_options(options)
        probs = torch.sigmoid(self.logits(model, example).float())
        return [
            (self.labels.decode(int(i)), float(probs[i])) for i in probs.argsort(descending=True)
        ]
