"""Attention variants for long inputs, behind one interface (:class:`AttentionKernel`)
and one registry (:data:`KERNELS`)."""

from __future__ import annotations

from selfattn.efficient.base import (
    KERNELS,
    AttentionKernel,
    DenseKernel,
    build_kernel,
    check_kernel_inputs,
    register_kernel,
)

__all__ = [
    "KERNELS",
    "AttentionKernel",
    "DenseKernel",
    "build_kernel",
    "check_kernel_inputs",
    "register_kernel",
]
