"""One optimizer step: forward under autocast, the loss reduced over the processes,
backward (scaled for float16), gradient clipping and the update."""

from __future__ import annotations

import contextlib
from typing import Any

import torch
from torch import nn

from selfattn.train.distributed import Distributed, StepTotals
from selfattn.train.loop_state import Parts


def optimizer_step(
    parts: Parts,
    batch: Any,
    step: int,
    n: int,
    tokens: int,
    dist: Distributed,
    amp_dtype: torch.dtype | None,
    grad_clip: float | None,
) -> StepTotals:
    """One optimizer step on ``batch``, whose loss is the mean over ``n`` units (this
    rank's, 0 for an empty share) of ``tokens``; returns its (smoothed) loss summed
    over the global batch, with its units and tokens. Nothing in it waits for the
    device in one process.

    Args:
        parts: what is trained.
        batch: the batch, on the device.
        step: the run's optimizer steps before this one (some losses change with it).
        n: this rank's units in ``batch``.
        tokens: this rank's tokens in ``batch``.
        dist: the processes training the run.
        amp_dtype: the autocast dtype (``train.amp``), or ``None`` for float32.
        grad_clip: ``train.grad_clip``.
    """
    model, optimizer, scaler = parts.model, parts.optimizer, parts.scaler
    autocast = (
        torch.autocast("cuda", dtype=amp_dtype)
        if amp_dtype is not None
        else contextlib.nullcontext()
    )
    with autocast:
        loss = parts.loss(batch, step)
    loss, totals = dist.reduce(loss, n, tokens)
    optimizer.zero_grad(set_to_none=True)
    if scaler is not None:
        scaler.scale(loss).backward()
        scaler.unscale_(optimizer)
    else:
        loss.backward()
    if grad_clip is not None:
        nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
    if scaler is not None:
        scaler.step(optimizer)
        scaler.update()
    else:
        optimizer.step()
    return totals
