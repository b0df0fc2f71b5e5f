"""The device a run trains on and the precision it computes in, with a warning for each
option that does nothing on that device (``train.amp``, ``train.tf32`` and
``model.linear_layers = "onednn"`` off their hardware).
"""

from __future__ import annotations

import warnings

import torch

from selfattn.config import Config
from selfattn.messages import plural


def resolve_device(name: str) -> torch.device:
    """``"auto"`` → CUDA when available, else the CPU; ``"cuda"`` without CUDA is an error."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise ValueError("train.device is 'cuda' but no CUDA device is available")
    return torch.device(name)


def describe(device: torch.device) -> str:
    """``device`` for the opening line: ``cuda:0``, or ``cpu, 2 threads``."""
    if device.type == "cpu":
        return f"{device}, {plural(torch.get_num_threads(), 'thread')}"
    return str(device)


def autocast_dtype(config: Config, device: torch.device, stacklevel: int = 2) -> torch.dtype | None:
    """The dtype ``train.amp`` runs the forward pass in on ``device`` (bf16 where the GPU
    has it, else float16; ``None``: float32), after warning about each option set in
    ``config`` that ``device`` ignores.

    Args:
        config: the run's configuration.
        device: where it trains.
        stacklevel: the warnings' :func:`warnings.warn` stack level, counted from the
            caller of this function.
    """
    stacklevel += 1  # this function's own frame
    dtype: torch.dtype | None = None
    if config.train.amp:
        if device.type == "cuda":
            dtype = torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
        else:
            warnings.warn(
                "train.amp is only used on CUDA; training in float32 on the CPU",
                stacklevel=stacklevel,
            )
    if config.train.tf32 and device.type != "cuda":
        warnings.warn(
            f"train.tf32 is only used on CUDA; {device.type} multiplies in float32",
            stacklevel=stacklevel,
        )
    if getattr(config.model, "linear_layers", "torch") == "onednn" and (
        device.type != "cpu" or dtype is not None
    ):
        warnings.warn(
            f"model.linear_layers = 'onednn' is for float32 training on the CPU; on "
            f"{device.type} the linear layers run PyTorch's F.linear",
            stacklevel=stacklevel,
        )
    return dtype
