"""Attention variants for long inputs, behind one interface (:class:`AttentionKernel`)
and one registry (:data:`KERNELS`): dense (fused softmax), window (truncated), linear
(Katharopoulos et al. 2020, parallel and recurrent), Performer (FAVOR+), Linformer,
LSH (Reformer) and Nyström; plus edge-list graph attention (:func:`edge_attention`)."""

from __future__ import annotations

from selfattn.kernels.base import (
    KERNELS,
    AttentionKernel,
    DenseKernel,
    build_kernel,
    check_kernel_inputs,
    register_kernel,
)

# Importing a variant's module registers it in KERNELS.
from selfattn.kernels.graph import dense_to_edge_index, edge_attention, scatter_softmax
from selfattn.kernels.linear import LinearAttentionState, LinearKernel, linear_attention
from selfattn.kernels.linformer import LinformerKernel
from selfattn.kernels.lsh import LSHKernel
from selfattn.kernels.nystrom import NystromKernel
from selfattn.kernels.performer import PerformerKernel
from selfattn.kernels.window import WindowKernel, window_attention

__all__ = [
    "KERNELS",
    "AttentionKernel",
    "DenseKernel",
    "LSHKernel",
    "LinearAttentionState",
    "LinearKernel",
    "LinformerKernel",
    "NystromKernel",
    "PerformerKernel",
    "WindowKernel",
    "build_kernel",
    "check_kernel_inputs",
    "dense_to_edge_index",
    "edge_attention",
    "linear_attention",
    "register_kernel",
    "scatter_softmax",
    "window_attention",
]
