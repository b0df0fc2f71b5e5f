"""AdamW and the learning-rate schedule: linear warm-up, then linear / cosine decay or constant."""

from __future__ import annotations

import math

import torch
from torch import nn

from selfattn.train.config import Schedule, TrainConfig


def build_optimizer(model: nn.Module, config: TrainConfig) -> torch.optim.AdamW:
    """AdamW with weight decay on weight matrices and embeddings only.

    Biases and norm gains (1-D parameters) are not decayed: shrinking them towards zero
    is no regulariser, it only shifts or rescales activations.
    """
    decay = [p for p in model.parameters() if p.requires_grad and p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.requires_grad and p.dim() < 2]
    groups = [
        {"params": decay, "weight_decay": config.weight_decay},
        {"params": no_decay, "weight_decay": 0.0},
    ]
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
