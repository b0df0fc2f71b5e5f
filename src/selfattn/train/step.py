"""One optimizer step: forward under autocast, the loss reduced over the processes,
backward (scaled for float16), gradient clipping and the update — or, for
``train.nan_policy = "skip"``, no update when the loss is not finite."""

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
    skip_not_finite: bool = False,
) -> StepTotals:
    """One optimizer step on ``batch``, whose loss is the mean over ``n`` units (this
    rank's, 0 for an empty share) of ``tokens``; returns its (smoothed) loss summed
    over the global batch, with its units and tokens. Nothing in it waits for the
    device in one process, unless ``skip_not_finite`` asks it to read the loss.

    Args:
        parts: what is trained.
        batch: the batch, on the device.
        step: the run's optimizer steps before this one (some losses change with it).
        n: this rank's units in ``batch``.
        tokens: this rank's tokens in ``batch``.
        dist: the processes training the run.
        amp_dtype: the autocast dtype (``train.amp``), or ``None`` for float32.
        grad_clip: ``train.grad_clip``.
        skip_not_finite: ``train.nan_policy = "skip"``: when the loss summed over the
            global batch (the same on every rank, so every rank decides alike) is not
            finite, drop the gradients instead of updating, and return totals with no
            loss and no units, marked ``skipped``.
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
    # After the backward pass, which every rank runs (DDP and FSDP reduce in it).
    if skip_not_finite and not bool(torch.isfinite(totals.loss_sum)):
        optimizer.zero_grad(set_to_none=True)
        if scaler is not None:
            scaler.update()  # closes the step unscale_ opened (and lowers the scale)
        return StepTotals(torch.zeros_like(totals.loss_sum), 0, totals.tokens, skipped=True)
    if grad_clip is not None:
        nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
    if scaler is not None:
        scaler.step(optimizer)
        scaler.update()
    else:
        optimizer.step()
    return totals
