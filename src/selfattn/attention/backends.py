"""Which of PyTorch's fused attention kernels selfattn lets SDPA choose on a GPU.

``F.scaled_dot_product_attention`` picks a backend by a priority order. Since PyTorch 2.10
that order puts cuDNN's fused attention first on Hopper and Blackwell GPUs (sm90, sm100)
once the bundled cuDNN is 9.15 or newer, which PyTorch 2.11's is; it serves half-precision
inputs. cuDNN builds an execution plan for every new shape of its inputs (PyTorch's
``TORCH_CUDNN_SDPA_AVOID_RECOMPILE``, pull request 155958, exists for that reason; users
have measured about half a second a plan). selfattn's batches are bucketed by length, so
the shapes change nearly every step. While training or decoding on CUDA, selfattn
therefore lets SDPA choose among flash, memory-efficient and math attention only; off
CUDA nothing changes.

Why it was done: bf16 autocast trained the bible-en-es Transformer several times slower
than float32 on an H200 with PyTorch 2.11 (docs/results.md), while fixed-shape benchmarks
under the same autocast kept pace with Hugging Face's BERT. The per-shape plans are the
likely cause, not yet confirmed.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

#: The SDPA backends allowed on CUDA: every one but cuDNN's (math serves any input).
VARYING_SHAPE_BACKENDS = (
    SDPBackend.FLASH_ATTENTION,
    SDPBackend.EFFICIENT_ATTENTION,
    SDPBackend.MATH,
)


@contextlib.contextmanager
def varying_shapes(device: torch.device | str) -> Iterator[None]:
    """Within: SDPA on a CUDA ``device`` does not use cuDNN's attention (it plans for each
    new shape); the previous choice comes back on exit. Off CUDA: no change."""
    if torch.device(device).type != "cuda":
        yield
        return
    with sdpa_kernel(list(VARYING_SHAPE_BACKENDS)):
        yield
