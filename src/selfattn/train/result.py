"""What a training run returns (:func:`selfattn.train.loop.train`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from torch import nn


@dataclass
class TrainResult:
    """What :func:`~selfattn.train.loop.train` returns.

    Attributes:
        model: the model after the last epoch run (the best one is in ``run_dir/best``).
        history: every epoch's metrics line, including those before a resume.
        best: the metrics line of the best epoch (``None`` if no epoch ran).
        stopped_early: training stopped for lack of improvement (``patience``).
        run_dir: where checkpoints and metrics are.
        out_of_time: ``train.max_minutes`` ended the run before ``train.epochs`` (or
            early stopping); ``--resume`` goes on from ``last``.
    """

    model: nn.Module
    history: list[dict[str, Any]]
    best: dict[str, Any] | None
    stopped_early: bool
    run_dir: Path
    out_of_time: bool = False
