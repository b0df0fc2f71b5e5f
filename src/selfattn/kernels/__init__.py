"""Attention kernels behind one interface (:class:`AttentionKernel`: one call, capability
flags, one-line refusals) and one registry (:data:`KERNELS`): dense (the lecture's formula,
fused SDPA when it can), window (truncated), linear (Katharopoulos et al. 2020, parallel
and recurrent), Performer (FAVOR+), Linformer, LSH (Reformer) and Nyström; plus edge-list
graph attention (:func:`edge_attention`)."""

from __future__ import annotations

from selfattn.kernels.base import (
    CAPABILITIES,
    KERNELS,
    AttentionKernel,
    AttentionRequest,
    Capability,
    build_kernel,
    check_kernel_inputs,
    register_kernel,
)

# Importing a variant's module registers it in KERNELS (dense first: tables list it first).
from selfattn.kernels.dense import DenseKernel
from selfattn.kernels.graph import (
    dense_to_edge_index,
    edge_attention,
    edge_attention_weights,
    edge_weights_to_dense,
    scatter_softmax,
)
from selfattn.kernels.linear import (
    LinearAttentionState,
    LinearKernel,
    linear_attention,
    linear_attention_weights,
)
from selfattn.kernels.linformer import LinformerKernel
from selfattn.kernels.lsh import LSHKernel
from selfattn.kernels.nystrom import NystromKernel
from selfattn.kernels.performer import PerformerKernel
from selfattn.kernels.window import WindowKernel, window_attention

__all__ = [
    "CAPABILITIES",
    "KERNELS",
    "AttentionKernel",
    "AttentionRequest",
    "Capability",
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
    "edge_attention_weights",
    "edge_weights_to_dense",
    "linear_attention",
    "linear_attention_weights",
    "register_kernel",
    "scatter_softmax",
    "window_attention",
]
