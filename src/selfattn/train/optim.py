"""AdamW and the learning-rate schedule: linear warm-up, then linear / cosine decay or constant."""

from __future__ import annotations

import math

import torch
from torch import nn

from selfattn.config import Schedule, TrainConfig


def build_optimizer(model: nn.Module, config: TrainConfig) -> torch.optim.AdamW:
    """AdamW with weight decay on weight matrices and embeddings only.

    Biases and norm gains (1-D parameters) are not decayed: shrinking them towards zero
    is no regulariser, it only shifts or rescales activations. With
    ``config.layer_lr_decay`` < 1, the model's ``layer_groups()`` (input up to head)
    train at ``lr · d^(depth below the head)``. Frozen parameters (``requires_grad``
    off) are left out.

    Raises:
        ValueError: ``layer_lr_decay`` < 1 on a model that has no layer groups.
    """
    if config.layer_lr_decay == 1.0:
        layers: list[list[nn.Parameter]] = [list(model.parameters())]
    else:
        layer_groups = getattr(model, "layer_groups", None)
        if layer_groups is None:
            raise ValueError(
                f"train.layer_lr_decay = {config.layer_lr_decay}: this model has no stack of "
                "layers to decay over; leave it at 1"
            )
        layers = layer_groups()
    groups = []
    top = len(layers) - 1
    for depth, params in enumerate(layers):
        lr = config.lr * config.layer_lr_decay ** (top - depth)
        trained = [p for p in params if p.requires_grad]
        for decayed, weight_decay in ((True, config.weight_decay), (False, 0.0)):
            chosen = [p for p in trained if (p.dim() >= 2) == decayed]
            if chosen or len(layers) == 1:
                groups.append({"params": chosen, "weight_decay": weight_decay, "lr": lr})
    return torch.optim.AdamW(groups, lr=config.lr)


class WarmupDecay:
    """The LR multiplier at step s: s / warmup during warm-up, then the schedule's decay.

    A plain object rather than a closure so that ``LambdaLR.state_dict`` stores it.

    Args:
        warmup_steps: steps of linear warm-up from 0 to the peak.
        total_steps: steps of the whole run; linear and cosine decay reach 0 there.
        schedule: ``linear``, ``cosine`` or ``constant``.
    """

    def __init__(self, warmup_steps: int, total_steps: int, schedule: Schedule) -> None:
        self.warmup_steps = warmup_steps
        self.total_steps = max(total_steps, 1)
        self.schedule = schedule

    def __call__(self, step: int) -> float:
        if step < self.warmup_steps:
            return (step + 1) / (self.warmup_steps + 1)
        if self.schedule == "constant":
            return 1.0
        decay_steps = max(self.total_steps - self.warmup_steps, 1)
        progress = min((step - self.warmup_steps) / decay_steps, 1.0)
        if self.schedule == "linear":
            return 1.0 - progress
        return 0.5 * (1.0 + math.cos(math.pi * progress))


def build_scheduler(
    optimizer: torch.optim.Optimizer, config: TrainConfig, total_steps: int
) -> torch.optim.lr_scheduler.LambdaLR:
    """The per-step schedule of ``config`` over a run of ``total_steps`` optimizer steps."""
    return torch.optim.lr_scheduler.LambdaLR(
        optimizer, WarmupDecay(config.warmup_steps, total_steps, config.schedule)
    )
