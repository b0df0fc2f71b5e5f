"""How well predicted label sets match the gold ones (lecture 001, multi-label
classification): the sigmoid head's sets and a seq2seq model's decoded sets are scored by
the same three numbers, so the two forms compare in one table.

* ``set_f1`` — example-based F1: the mean over examples of ``2|P∩G| / (|P| + |G|)``,
  where an example whose predicted and gold sets are both empty scores 1 (nothing to
  find, nothing claimed);
* ``micro_f1`` — F1 of all (example, label) decisions pooled: ``2·TP / (2·TP + FP + FN)``
  (1 when there is nothing to find and nothing was claimed);
* ``exact_match`` — the share of examples whose predicted set equals the gold set.

The binary cross-entropy of the sigmoid head is :func:`label_set_loss`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor

#: A label is in the predicted set when its probability is at least this.
THRESHOLD = 0.5


def label_set_loss(logits: Tensor, targets: Tensor, label_smoothing: float = 0.0) -> Tensor:
    """Mean binary cross-entropy over every (example, label) pair.

    Args:
        logits: ``(B, C)``, one logit per label.
        targets: ``(B, C)``, 1 where the label is in the example's set, else 0.
        label_smoothing: ε: targets move to ``ε/2`` and ``1 − ε/2`` (each label is a
            two-way choice).
    """
    targets = targets.float() * (1 - label_smoothing) + label_smoothing / 2
    return F.binary_cross_entropy_with_logits(logits.float(), targets)


def predicted_sets(logits: Tensor, threshold: float = THRESHOLD) -> Tensor:
    """``(B, C)`` bool: the labels whose sigmoid probability is at least ``threshold``."""
    return torch.sigmoid(logits.float()) >= threshold


def set_f1(predicted: frozenset[str] | set[str], gold: frozenset[str] | set[str]) -> float:
    """``2|P∩G| / (|P| + |G|)``; 1 when both are empty."""
    if not predicted and not gold:
        return 1.0
    return 2 * len(predicted & gold) / (len(predicted) + len(gold))


class SetScores:
    """Running totals for :func:`set_f1`, micro F1 and exact match over examples."""

    def __init__(self) -> None:
        self.f1_sum = 0.0
        self.exact = 0
        self.count = 0
        self.true_positives = 0
        self.claimed = 0  # |P| summed
        self.gold = 0  # |G| summed

    def add(self, predicted: Iterable[str], gold: Iterable[str]) -> None:
        """One example's predicted and gold sets (duplicates count once)."""
        p, g = set(predicted), set(gold)
        self.f1_sum += set_f1(p, g)
        self.exact += p == g
        self.count += 1
        self.true_positives += len(p & g)
        self.claimed += len(p)
        self.gold += len(g)

    def metrics(self) -> dict[str, float]:
        """``set_f1``, ``micro_f1``, ``exact_match`` and ``count``."""
        pooled = self.claimed + self.gold
        return {
            "set_f1": self.f1_sum / max(self.count, 1),
            "micro_f1": 2 * self.true_positives / pooled if pooled else 1.0,
            "exact_match": self.exact / max(self.count, 1),
            "count": float(self.count),
        }


def set_scores(
    predicted: Sequence[Iterable[str]], gold: Sequence[Iterable[str]]
) -> dict[str, float]:
    """:class:`SetScores` of paired predicted and gold sets."""
    scores = SetScores()
    for p, g in zip(predicted, gold, strict=True):
        scores.add(p, g)
    return scores.metrics()


__all__ = ["THRESHOLD", "SetScores", "label_set_loss", "predicted_sets", "set_f1", "set_scores"]
