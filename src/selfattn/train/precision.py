"""``train.tf32``: float32 matrix products on a GPU's TensorFloat-32 tensor cores while
training on CUDA.

TF32 keeps float32's range and rounds each product's inputs to a 10-bit mantissa (bf16
keeps 7), accumulating in float32; it runs on the tensor cores of NVIDIA's Ampere and later
GPUs, whose datasheets give it several times the IEEE float32 rate (H100: 495 against 67
dense TFLOP/s). PyTorch leaves it off for matrix products since 1.12, and on for cuDNN's
convolutions and RNNs (``torch.backends.cudnn.allow_tf32``). The setting is PyTorch's
``torch.set_float32_matmul_precision("high")``; the previous one comes back on exit.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch


@contextlib.contextmanager
def tensor_float32(device: torch.device | str, enabled: bool) -> Iterator[None]:
    """Within: float32 matrix products on a CUDA ``device`` may use TF32 when ``enabled``.
    Off CUDA, or not ``enabled``: no change."""
    if not enabled or torch.device(device).type != "cuda":
        yield
        return
    before = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("high")
    try:
        yield
    finally:
        torch.set_float32_matmul_precision(before)
