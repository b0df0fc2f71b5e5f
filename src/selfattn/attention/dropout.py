"""Dropout masks, two ways (Srivastava et al. 2014: keep each value with probability
1 − p, scale the kept ones by 1 / (1 − p)).

* ``"bernoulli"``: PyTorch's ``F.dropout``. On CPU it draws each mask value from a
  Bernoulli distribution one element at a time.
* ``"uniform"``: the same distribution from uniform noise, ``keep = U[0, 1) < 1 − p``
  (``torch.rand``, about half the CPU time per element of the Bernoulli draws; timings
  in benchmarks/README.md). Each value is kept with probability 1 − p up to float32's
  2⁻²⁴, independently, and scaled the same way; only the random stream differs, so a run
  with these masks does not repeat one with PyTorch's.
* ``"auto"``: ``"uniform"`` on the CPU, ``"bernoulli"`` elsewhere, where PyTorch's masks
  are drawn inside fused kernels (a CUDA GPU's flash attention among them).
"""

from __future__ import annotations

from typing import Literal

import torch
from torch import Tensor, nn
from torch.nn import functional as F

#: How dropout draws its masks: PyTorch's Bernoulli draws, or a threshold on uniform noise,
#: or (``"auto"``) the second on the CPU and the first elsewhere.
DropoutMasks = Literal["auto", "bernoulli", "uniform"]
DROPOUT_MASKS: tuple[DropoutMasks, ...] = ("auto", "bernoulli", "uniform")


def draws_uniform(masks: DropoutMasks, device: torch.device) -> bool:
    """Whether dropout of kind ``masks`` on ``device`` thresholds uniform noise."""
    return masks == "uniform" or (masks == "auto" and device.type == "cpu")


def dropout_of(x: Tensor, p: float, masks: DropoutMasks, training: bool = True) -> Tensor:
    """Dropout of ``x`` with the masks of kind ``masks``: :func:`uniform_dropout` or
    ``F.dropout``."""
    if draws_uniform(masks, x.device):
        return uniform_dropout(x, p, training)
    return F.dropout(x, p, training)


def uniform_dropout(x: Tensor, p: float, training: bool = True) -> Tensor:
    """Dropout of ``x`` (any shape) with a mask thresholded from uniform noise.

    Args:
        x: the values.
        p: the probability of dropping each one, in [0, 1).
        training: the identity when False, as ``F.dropout``.

    Returns:
        ``x`` with each value zeroed with probability ``p`` and the rest scaled by
        ``1 / (1 − p)``.
    """
    if not training or p == 0.0:
        return x
    # float32 noise whatever x's dtype: a bf16 threshold would round 1 - p. The noise
    # becomes the scaled mask in place (a boolean mask would be cast on every product).
    noise = torch.rand(x.shape, device=x.device, dtype=torch.float32)
    mask = noise.lt_(1.0 - p).mul_(1.0 / (1.0 - p))  # 0 or 1 / (1 - p)
    return x * mask.to(x.dtype)


class UniformDropout(nn.Dropout):
    """``nn.Dropout`` with masks from :func:`uniform_dropout` (same ``p``, same scaling);
    with ``masks = "auto"``, only on the CPU (``F.dropout`` elsewhere)."""

    def __init__(self, p: float = 0.5, inplace: bool = False, masks: DropoutMasks = "uniform"):
        super().__init__(p, inplace)
        self.masks: DropoutMasks = masks

    def forward(self, input: Tensor) -> Tensor:
        return dropout_of(input, self.p, self.masks, self.training)
