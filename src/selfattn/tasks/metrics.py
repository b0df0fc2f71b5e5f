"""The losses and development metrics of the task types with one output per vector or
per set: cross-entropy and accuracy over labelled positions (token and sequence tasks),
squared error in units of the targets' spread with RMSE and MAE (regression)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from selfattn.models.act import PonderMeter
from selfattn.specials import IGNORE_INDEX


def compute_loss(logits: Tensor, labels: Tensor, label_smoothing: float = 0.0) -> Tensor:
    """Mean cross-entropy over labelled positions (:data:`IGNORE_INDEX` is ignored).

    Args:
        logits: ``(B, L, C)`` (token task) or ``(B, C)`` (sequence task).
        labels: ``(B, L)`` or ``(B,)``.
        label_smoothing: ε.
    """
    return F.cross_entropy(
        logits.reshape(-1, logits.shape[-1]).float(),
        labels.reshape(-1),
        ignore_index=IGNORE_INDEX,
        label_smoothing=label_smoothing,
    )


def regression_loss(predictions: Tensor, targets: Tensor, target_std: float = 1.0) -> Tensor:
    """Mean squared error of ``(B,)`` predictions in units of ``target_std`` (the training
    targets' spread), so the loss starts near 1 whatever the targets' units."""
    return F.mse_loss(predictions.float() / target_std, targets.float() / target_std)


def eval_batches(
    model: nn.Module, batches: Iterable[Any], device: torch.device | str | None = None
) -> Iterator[Any]:
    """``batches``, each moved to ``device`` (default: the model's), with ``model`` in eval
    mode while they are read; its former mode is put back after the last one."""
    if device is None:
        device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    try:
        for batch in batches:
            yield batch.to(device)
    finally:
        model.train(was_training)


@torch.no_grad()
def evaluate_regression(
    model: nn.Module, batches: Iterable[Any], *, device: torch.device | str | None = None
) -> dict[str, float]:
    """Errors of a regression task model on ``batches``.

    Returns:
        ``{"loss": :func:`regression_loss`, "rmse", "mae", "count": targets}``, the errors in
        the targets' units.
    """
    std = float(getattr(getattr(model, "spec", None), "target_std", 1.0))
    squared, absolute, count = 0.0, 0.0, 0
    ponder = PonderMeter(model)
    for batch in eval_batches(model, batches, device):
        error = model(batch).float() - batch.labels.float()  # (B,)
        ponder.add()
        squared += float((error**2).sum())
        absolute += float(error.abs().sum())
        count += error.numel()
    mse = squared / max(count, 1)
    return {
        "loss": mse / std**2,
        "rmse": mse**0.5,
        "mae": absolute / max(count, 1),
        "count": float(count),
        **ponder.metrics(),
    }


@torch.no_grad()
def evaluate(
    model: nn.Module, batches: Iterable[Any], *, device: torch.device | str | None = None
) -> dict[str, float]:
    """Loss and accuracy of a task model (token or sequence task) on ``batches``; a
    regression model's errors (:func:`evaluate_regression`).

    For a token task both are over real (labelled) positions: token accuracy.

    Returns:
        ``{"loss": mean cross-entropy, "accuracy": fraction correct, "count": labels}``;
        a model with adaptive depth adds ``"ponder_steps"`` and ``"ponder_cost"``, the
        mean steps N and N + R per real position (:class:`~selfattn.models.act.PonderMeter`).
    """
    if getattr(getattr(model, "spec", None), "task", None) == "regression":
        return evaluate_regression(model, batches, device=device)
    loss_sum, correct, count = 0.0, 0, 0
    ponder = PonderMeter(model)
    for batch in eval_batches(model, batches, device):
        logits = model(batch).float()
        ponder.add()
        labels = batch.labels
        real = labels != IGNORE_INDEX
        loss_sum += float(
            F.cross_entropy(
                logits.reshape(-1, logits.shape[-1]),
                labels.reshape(-1),
                reduction="sum",
                ignore_index=IGNORE_INDEX,
            )
        )
        correct += int((logits.argmax(-1)[real] == labels[real]).sum())
        count += int(real.sum())
    return {
        "loss": loss_sum / max(count, 1),
        "accuracy": correct / max(count, 1),
        "count": float(count),
        **ponder.metrics(),
    }
