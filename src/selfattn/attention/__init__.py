"""Attention: the kernel, masks, scores, normalisers and the multi-head module."""

from __future__ import annotations

from selfattn.attention.functional import attention
from selfattn.attention.masks import (
    MaskArgs,
    adjacency_mask,
    causal_mask,
    padding_mask,
    structural_mask,
    window_mask,
)
from selfattn.attention.multihead import MultiHeadAttention
from selfattn.attention.normalizers import NORMALIZERS, resolve_normalizer
from selfattn.attention.scores import SCORES, AdditiveScore, dot_score, scaled_dot_score

__all__ = [
    "NORMALIZERS",
    "SCORES",
    "AdditiveScore",
    "MaskArgs",
    "MultiHeadAttention",
    "adjacency_mask",
    "attention",
    "causal_mask",
    "dot_score",
    "padding_mask",
    "resolve_normalizer",
    "scaled_dot_score",
    "structural_mask",
    "window_mask",
]
