"""What the training loop optimises, per output type.

The loop (:mod:`selfattn.train.loop`) is the same for every task; an :class:`Objective`
supplies the three task-specific pieces: build the model, the loss of a batch, and the
development metrics (which must include ``"accuracy"``, the checkpoint-selection score).

* one label per vector / per set: :class:`ClassificationObjective` (cross-entropy on the
  task model's logits);
* one number per set: :class:`RegressionObjective` (squared error in units of the
  training targets' standard deviation; its metrics have ``"rmse"`` and no accuracy, and
  the loop keeps the epoch of lowest dev loss);
* seq2seq: :class:`selfattn.tasks.seq2seq.Seq2SeqObjective` (teacher forcing, scheduled
  sampling, attention regularisers, the non-autoregressive pass).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Protocol

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from selfattn.tasks.model import TaskSpec, build_model_from_spec
from selfattn.tasks.seq2seq import Seq2SeqObjective, build_seq2seq_model
from selfattn.train.config import Config


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
        """Metrics over ``batches``, with ``"loss"`` and ``"accuracy"``."""
        ...


def compute_loss(logits: Tensor, labels: Tensor, label_smoothing: float = 0.0) -> Tensor:
    """Mean cross-entropy over labelled positions (``-100`` is ignored).

    Args:
        logits: ``(B, L, C)`` (token task) or ``(B, C)`` (sequence task).
        labels: ``(B, L)`` or ``(B,)``.
        label_smoothing: ε.
    """
    return F.cross_entropy(
        logits.reshape(-1, logits.shape[-1]).float(),
        labels.reshape(-1),
        ignore_index=-100,
        label_smoothing=label_smoothing,
    )


def regression_loss(predictions: Tensor, targets: Tensor, target_std: float = 1.0) -> Tensor:
    """Mean squared error of ``(B,)`` predictions in units of ``target_std`` (the training
    targets' spread), so the loss starts near 1 whatever the targets' units."""
    return F.mse_loss(predictions.float() / target_std, targets.float() / target_std)


@torch.no_grad()
def evaluate_regression(
    model: nn.Module, batches: Iterable[Any], *, device: torch.device | str | None = None
) -> dict[str, float]:
    """Errors of a regression task model on ``batches``.

    Returns:
        ``{"loss": :func:`regression_loss`, "rmse", "mae", "count": targets}``, the errors in
        the targets' units.
    """
    if device is None:
        device = next(model.parameters()).device
    std = float(getattr(getattr(model, "spec", None), "target_std", 1.0))
    was_training = model.training
    model.eval()
    squared, absolute, count = 0.0, 0.0, 0
    for batch in batches:
        batch = batch.to(device)
        error = model(batch).float() - batch.labels.float()  # (B,)
        squared += float((error**2).sum())
        absolute += float(error.abs().sum())
        count += error.numel()
    model.train(was_training)
    mse = squared / max(count, 1)
    return {
        "loss": mse / std**2,
        "rmse": mse**0.5,
        "mae": absolute / max(count, 1),
        "count": float(count),
    }


@torch.no_grad()
def evaluate(
    model: nn.Module, batches: Iterable[Any], *, device: torch.device | str | None = None
) -> dict[str, float]:
    """Loss and accuracy of a task model (token or sequence task) on ``batches``; a
    regression model's errors (:func:`evaluate_regression`).

    For a token task both are over real (labelled) positions: token accuracy.

    Returns:
        ``{"loss": mean cross-entropy, "accuracy": fraction correct, "count": labels}``.
    """
    if getattr(getattr(model, "spec", None), "task", None) == "regression":
        return evaluate_regression(model, batches, device=device)
    if device is None:
        device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    loss_sum, correct, count = 0.0, 0, 0
    for batch in batches:
        batch = batch.to(device)
        logits = model(batch).float()
        labels = batch.labels
        real = labels != -100
        loss_sum += float(
            F.cross_entropy(
                logits.reshape(-1, logits.shape[-1]), labels.reshape(-1), reduction="sum"
            )
        )
        correct += int((logits.argmax(-1)[real] == labels[real]).sum())
        count += int(real.sum())
    model.train(was_training)
    return {
        "loss": loss_sum / max(count, 1),
        "accuracy": correct / max(count, 1),
        "count": float(count),
    }


@dataclass
class ClassificationObjective:
    """Cross-entropy on a :class:`~selfattn.tasks.TaskModel`'s logits."""

    config: Config
    spec: TaskSpec

    def build(self) -> nn.Module:
        """The task model of ``config.model`` for ``spec``."""
        return build_model_from_spec(self.config.model, self.spec)

    def loss(self, model: Any, batch: Any, step: int) -> Tensor:
        """Label-smoothed cross-entropy of ``model(batch)``."""
        return compute_loss(model(batch), batch.labels, self.config.train.label_smoothing)

    def evaluate(
        self, model: Any, batches: Iterable[Any], *, device: torch.device | str | None = None
    ) -> dict[str, float]:
        """See :func:`evaluate`."""
        return evaluate(model, batches, device=device)


@dataclass
class RegressionObjective(ClassificationObjective):
    """Squared error of a :class:`~selfattn.tasks.TaskModel` with a regression head."""

    def loss(self, model: Any, batch: Any, step: int) -> Tensor:
        """:func:`regression_loss` of ``model(batch)``."""
        return regression_loss(model(batch), batch.labels, self.spec.target_std)

    def evaluate(
        self, model: Any, batches: Iterable[Any], *, device: torch.device | str | None = None
    ) -> dict[str, float]:
        """See :func:`evaluate_regression`."""
        return evaluate_regression(model, batches, device=device)


@dataclass
class Seq2SeqTraining(Seq2SeqObjective):
    """:class:`Seq2SeqObjective` that also builds its model from a run's config."""

    run: Config | None = None
    spec: TaskSpec | None = None

    def build(self) -> nn.Module:
        """The encoder–decoder of ``config.model`` and ``config.seq2seq`` for ``spec``."""
        assert self.run is not None and self.spec is not None
        return build_seq2seq_model(self.run.model, self.run.seq2seq, self.spec)


def objective_for(config: Config, spec: TaskSpec) -> Objective:
    """The objective of ``spec.task``."""
    if spec.task == "seq2seq":
        return Seq2SeqTraining(config.seq2seq, config.train.label_smoothing, run=config, spec=spec)
    if spec.task == "regression":
        return RegressionObjective(config, spec)
    return ClassificationObjective(config, spec)


def build_for_spec(config: Config, spec: TaskSpec) -> nn.Module:
    """The (untrained) model a checkpoint with ``config`` and ``spec`` holds."""
    return objective_for(config, spec).build()
