"""Scoring a model with exit heads (:mod:`selfattn.models.early_exit`) on a split: accuracy
against the mean number of blocks run, at one confidence threshold or over a sweep of them
(lecture 003's accuracy-vs-computation curve, for our models).

:func:`evaluate_early_exit` runs the adaptive stack itself and times it against the full
depth, batch by batch (interleaved, so both see the same machine load). :func:`exit_sweep`
runs every block once per batch and reads off what each threshold would do; the tests
check that this equals running :meth:`~selfattn.models.early_exit.EarlyExitModel.early_exit`.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any, cast

import torch
from torch import Tensor

from selfattn.datatypes import Batch
from selfattn.models.early_exit import EXIT_CRITERIA, confidence
from selfattn.models.pretrained_exit import ExitModel
from selfattn.specials import IGNORE_INDEX
from selfattn.tasks.metrics import eval_batches

#: The thresholds of ``selfattn eval --exit-sweep``: confidences in [0, 1].
SWEEP_THRESHOLDS: tuple[float, ...] = (
    0.0,
    0.5,
    0.6,
    0.7,
    0.75,
    0.8,
    0.85,
    0.9,
    0.925,
    0.95,
    0.975,
    0.99,
    0.995,
    0.999,
    1.0,
)
#: How far below the full depth's accuracy a threshold may be and still be "as good".
TOLERANCE = 0.01


@dataclass(frozen=True)
class ExitPoint:
    """One point of the curve: what stopping at ``threshold`` gives on a split.

    Attributes:
        threshold: the confidence threshold T (``None``: a fixed depth, every example
            leaving after ``mean_layers`` blocks).
        accuracy: fraction correct (a token task: of labelled positions).
        mean_layers: blocks run per example, on average.
        count: labels scored.
    """

    threshold: float | None
    accuracy: float
    mean_layers: float
    count: float


def check_exit_request(model: Any, threshold: float | None, criterion: str) -> ExitModel:
    """``model`` as an :data:`~selfattn.models.pretrained_exit.ExitModel`, the threshold and
    criterion checked.

    Raises:
        ValueError: a model without exit heads, T < 0 (or NaN), an unknown criterion
            (one line each).
    """
    if not getattr(model, "has_exit_heads", False):  # a seq2seq or bits model has no hooks
        raise ValueError(
            "early exit: this model has no exit heads; train it with "
            "--set model.exit_heads=true (a transformer, a conformer or a model.pretrained "
            "fine-tune, on a token or sequence task)"
        )
    if threshold is not None and not threshold >= 0:
        raise ValueError(
            f"--exit-threshold must be >= 0 (a confidence: 0 exits after block 1, above 1 "
            f"runs every block), got {threshold}"
        )
    if criterion not in EXIT_CRITERIA:
        raise ValueError(
            f"--exit-criterion: unknown criterion {criterion!r}; choose "
            f"{' or '.join(EXIT_CRITERIA)}"
        )
    return cast(ExitModel, model)


def _correct(logits: Tensor, labels: Tensor) -> tuple[Tensor, Tensor]:
    """Per example, labels right and labels scored: ``(B,)`` each."""
    real = labels != IGNORE_INDEX
    right = (logits.argmax(-1) == labels) & real
    if right.dim() == 1:
        return right.float(), real.float()
    return right.float().sum(dim=1), real.float().sum(dim=1)


@torch.no_grad()
def evaluate_early_exit(
    model: ExitModel, batches: Iterable[Batch], threshold: float, criterion: str = "max-prob"
) -> dict[str, float]:
    """Accuracy and mean blocks run at ``threshold``, with the wall time per example of the
    adaptive stack and of the full depth (the normal forward pass), each batch timed once
    each way, one after the other.

    Returns:
        ``accuracy``, ``mean_layers``, ``num_layers``, ``count`` (labels scored),
        ``examples``, ``full_depth_accuracy``, ``seconds_per_example``,
        ``full_depth_seconds_per_example`` and ``time_ratio`` (the first ÷ the second).
    """
    right = full_right = count = layers = examples = 0.0
    seconds = full_seconds = 0.0
    for batch in eval_batches(model, batches):
        start = time.perf_counter()
        full = model(batch)
        middle = time.perf_counter()
        result = model.early_exit(batch, threshold, criterion)
        end = time.perf_counter()
        full_seconds += middle - start
        seconds += end - middle
        got, scored = _correct(result.logits, batch.labels)
        full_got, _ = _correct(full, batch.labels)
        right += float(got.sum())
        full_right += float(full_got.sum())
        count += float(scored.sum())
        layers += float(result.layers.sum())
        examples += len(result.layers)
    return {
        "accuracy": right / max(count, 1.0),
        "mean_layers": layers / max(examples, 1.0),
        "num_layers": float(model.num_layers),
        "count": count,
        "examples": examples,
        "full_depth_accuracy": full_right / max(count, 1.0),
        "seconds_per_example": seconds / max(examples, 1.0),
        "full_depth_seconds_per_example": full_seconds / max(examples, 1.0),
        "time_ratio": seconds / full_seconds if full_seconds else float("nan"),
    }


@dataclass
class ExitSweep:
    """The accuracy-vs-blocks curve of a model on a split.

    Attributes:
        criterion: the confidence measure (``max-prob`` or ``entropy``).
        points: one per threshold, in the order given.
        fixed: every example leaving after block k, for k = 1 … N.
    """

    criterion: str
    points: list[ExitPoint]
    fixed: list[ExitPoint]

    @property
    def full_depth(self) -> ExitPoint:
        """Every block run: the normal model."""
        return self.fixed[-1]

    def best(self, tolerance: float = TOLERANCE) -> ExitPoint | None:
        """The threshold with the fewest mean blocks whose accuracy is at most
        ``tolerance`` below the full depth's (ties: the more accurate); ``None`` if none."""
        floor = self.full_depth.accuracy - tolerance - 1e-12
        good = [p for p in self.points if p.accuracy >= floor]
        return min(good, key=lambda p: (p.mean_layers, -p.accuracy), default=None)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        best = self.best()
        return {
            "criterion": self.criterion,
            "points": [asdict(p) for p in self.points],
            "fixed": [asdict(p) for p in self.fixed],
            "best": None if best is None else asdict(best),
        }


@torch.no_grad()
def exit_sweep(
    model: ExitModel,
    batches: Iterable[Batch],
    thresholds: Sequence[float] = SWEEP_THRESHOLDS,
    criterion: str = "max-prob",
) -> ExitSweep:
    """Every block's classifier run once on every batch; what each threshold would give
    (the same as :meth:`EarlyExitModel.early_exit` at it), and each fixed depth."""
    num_layers = model.num_layers
    right = torch.zeros(len(thresholds))
    layers = torch.zeros(len(thresholds))
    fixed_right = torch.zeros(num_layers)
    count = examples = 0.0
    limits = torch.tensor(list(thresholds), dtype=torch.float32)[:, None]  # (K, 1)
    for batch in eval_batches(model, batches):
        mask = model.exit_mask(batch)
        per_layer = model(batch, exits=True)
        assert isinstance(per_layer, list)
        sure = torch.stack([confidence(logits, mask, criterion) for logits in per_layer]).cpu()
        got = torch.stack([_correct(logits, batch.labels)[0] for logits in per_layer]).cpu()
        scored = _correct(per_layer[-1], batch.labels)[1].cpu()  # (B,)
        passes = sure[None] >= limits[..., None]  # (K, N, B)
        passes[:, -1] = True  # the last block's classifier answers whatever it is
        exit_at = passes.float().argmax(dim=1)  # (K, B): the first block that passes
        right += got.gather(0, exit_at).sum(dim=1)  # (K,)
        layers += (exit_at + 1).float().sum(dim=1)
        fixed_right += got.sum(dim=1)
        count += float(scored.sum())
        examples += len(scored)
    total, many = max(count, 1.0), max(examples, 1.0)
    points = [
        ExitPoint(float(t), float(r) / total, float(n) / many, count)
        for t, r, n in zip(thresholds, right, layers, strict=True)
    ]
    fixed = [
        ExitPoint(None, float(r) / total, float(k + 1), count) for k, r in enumerate(fixed_right)
    ]
    return ExitSweep(criterion, points, fixed)
