"""The ``multilabel`` task type: a set of labels per input, of any size (lecture 001,
"the machine decides how many labels").

The model is a label task's (:class:`~selfattn.models.TaskModel`: an input embedding, an
encoder, ``model.pooling``) with one logit per label; each label is a yes/no question,
learned with a binary cross-entropy (:func:`~selfattn.tasks.set_metrics.label_set_loss`),
and the predicted set holds the labels with sigmoid probability ≥ 0.5 (``--threshold``
on ``eval`` and ``predict`` moves it) — possibly none.
Metrics are set F1, micro F1 and exact set match (:mod:`~selfattn.tasks.set_metrics`);
checkpoints are chosen by dev set F1.

The other form of the lecture — a seq2seq model writing the set as a sequence — is the
``seq2seq`` task on the same data (``data.task = "seq2seq"``:
:func:`~selfattn.data.readers.label_sets.label_set_targets`), scored by the same numbers.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import torch
from torch import Tensor, nn

from selfattn.config import Config
from selfattn.data import Example
from selfattn.models.act import PonderMeter
from selfattn.models.spec import TaskSpec
from selfattn.specials import NO_LABELS
from selfattn.tasks.labelling import LabelTask
from selfattn.tasks.metrics import eval_batches
from selfattn.tasks.scored_data import DataFile
from selfattn.tasks.set_metrics import THRESHOLD, SetScores, label_set_loss, predicted_sets
from selfattn.tasks.task import AttentionFigure, register_task

__all__ = ["MultiLabelTask"]


@register_task
class MultiLabelTask(LabelTask):
    """A set of labels per input (module docstring)."""

    name = "multilabel"
    layout = "multilabel"
    accepts = frozenset({"vectors"})
    #: ``threshold``: the probability a label needs to be in the set (``--threshold``).
    options = frozenset({"threshold"})

    def __init__(self, config: Config, spec: TaskSpec | None = None) -> None:
        super().__init__(config, spec)
        #: What :meth:`evaluate` and :meth:`predict` put in the set: p ≥ this.
        self.threshold = THRESHOLD

    @contextlib.contextmanager
    def _threshold(self, options: dict[str, Any]) -> Iterator[dict[str, Any]]:
        """``options`` without ``threshold``, with :attr:`threshold` set from it inside.

        Raises:
            ValueError: a threshold outside (0, 1).
        """
        self.check_options(options)
        rest = {name: value for name, value in options.items() if name != "threshold"}
        threshold = float(options.get("threshold", THRESHOLD))
        if not 0.0 < threshold < 1.0:
            raise ValueError(f"--threshold must be a probability in (0, 1), got {threshold}")
        before, self.threshold = self.threshold, threshold
        try:
            yield rest
        finally:
            self.threshold = before

    def describe(self, options: dict[str, Any]) -> dict[str, Any]:
        return {"threshold": float(options.get("threshold", THRESHOLD))}

    def score(
        self, model: nn.Module, split: str | DataFile, *, truncate: bool = False, **options: Any
    ) -> dict[str, float]:
        """The :meth:`evaluate` metrics on a split, the sets at ``threshold``."""
        with self._threshold(options) as rest:
            return super().score(model, split, truncate=truncate, **rest)

    def attention(
        self, model: nn.Module, example: Example, **options: Any
    ) -> list[AttentionFigure]:
        """The self-attention maps (a threshold changes no map)."""
        with self._threshold(options) as rest:
            return super().attention(model, example, **rest)

    def loss_of(self, batch: Any) -> Callable[[Tensor], Tensor]:
        """:func:`label_set_loss` of the logits (with ``train.label_smoothing``)."""
        smoothing = self.config.train.label_smoothing
        return lambda logits: label_set_loss(logits, batch.labels, smoothing)

    @torch.no_grad()
    def evaluate(
        self, model: Any, batches: Iterable[Any], *, device: torch.device | str | None = None
    ) -> dict[str, float]:
        """Mean binary cross-entropy per (example, label), ``set_f1`` (what chooses the
        best epoch), ``micro_f1``, ``exact_match`` and ``count`` (examples), the sets at
        :attr:`threshold`."""
        scores, loss_sum = SetScores(), 0.0
        ponder = PonderMeter(model)
        names = self.labels.labels
        for batch in eval_batches(model, batches, device):
            logits = model(batch).float()  # (B, C)
            ponder.add()
            loss_sum += float(label_set_loss(logits, batch.labels)) * len(logits)
            chosen = predicted_sets(logits, self.threshold)
            for row, gold in zip(chosen.tolist(), batch.labels.bool().tolist(), strict=True):
                scores.add(
                    (n for n, yes in zip(names, row, strict=True) if yes),
                    (n for n, yes in zip(names, gold, strict=True) if yes),
                )
        metrics = scores.metrics()
        return {"loss": loss_sum / max(metrics["count"], 1), **metrics, **ponder.metrics()}

    def unlabelled(self, example: Example) -> Example:
        """``example`` with the empty set as its stand-in label."""
        return dataclasses.replace(example, label=())

    def predict(self, model: Any, example: Example, **options: Any) -> str:
        """The predicted set (p ≥ ``threshold``, default 0.5), comma-separated (``<none>``
        when empty), then every label with its probability:
        ``modal,past\\t(past 0.981, modal 0.907, number 0.120, …)``."""
        with self._threshold(options) as rest:
            ranked = self.ranked(model, example, **rest)
            chosen = [label for label, p in ranked if p >= self.threshold]
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
