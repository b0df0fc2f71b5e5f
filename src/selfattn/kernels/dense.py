"""The dense kernel in the registry, as ``"dense"``: the lecture's attention exactly as
written, :class:`~selfattn.attention.dense.DenseKernel`. It is defined in the attention
layer, where :class:`~selfattn.attention.MultiHeadAttention` takes it as its default
without importing the kernels.
"""

from __future__ import annotations

from selfattn.attention.dense import DenseKernel
from selfattn.kernels.base import register_kernel

__all__ = ["DenseKernel"]

register_kernel(DenseKernel)
