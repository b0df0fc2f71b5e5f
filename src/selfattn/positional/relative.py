"""Relative position representations (Shaw, Uszkoreit & Vaswani 2018, "Self-Attention
with Relative Position Representations", NAACL).

Instead of adding e^i to the input (lecture 000, §Positional Encoding), attention itself
learns a vector per clipped offset j − i, shared by all heads:

    e_ij = q_i · (k_j + a^K_{ij}) · scale,      b_i = Σ_j α_ij (v_j + a^V_{ij}),
    a^K_{ij} = w^K_{clip(j − i, −K, K)},        a^V_{ij} = w^V_{clip(j − i, −K, K)}.

Offsets beyond ±K share one vector, so the module has 2K + 1 rows per table whatever the
sequence length. Both terms are computed without a ``(T, S, D)`` tensor: the score term as
``q @ w^Kᵀ`` (one column per offset) gathered by offset, the value term by summing the
weights into offset buckets and multiplying by ``w^V``.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from selfattn.positional.base import RelativePositional, relative_offsets


class ShawRelativePositional(RelativePositional):
    """Learned key (and value) vectors per clipped relative offset.

    Args:
        head_dim: D, the size of each table row.
        max_distance: K; offsets are clipped to ``[-K, K]``.
        values: also learn ``a^V`` (adds :meth:`value_term`, which needs the weights).
    """

    def __init__(self, head_dim: int, max_distance: int = 16, values: bool = True) -> None:
        super().__init__()
        if max_distance < 0:
            raise ValueError(f"max_distance must be >= 0, got {max_distance}")
        self.max_distance = max_distance
        self.key_table = nn.Parameter(0.02 * torch.randn(2 * max_distance + 1, head_dim))
        self.value_table = (
            nn.Parameter(0.02 * torch.randn(2 * max_distance + 1, head_dim)) if values else None
        )
        self.needs_weights = values

    def bucket(self, q_pos: Tensor, k_pos: Tensor) -> Tensor:
        """``(T, S)`` row index ``clip(j − i, −K, K) + K`` into the tables."""
        offsets = relative_offsets(q_pos, k_pos)
        return offsets.clamp(-self.max_distance, self.max_distance) + self.max_distance

    def score_bias(self, q: Tensor, q_pos: Tensor, k_pos: Tensor, scale: float) -> Tensor:
        """``scale · q_i · a^K_{ij}``.

        Args:
            q: ``(B, H, T, D)`` queries.
            q_pos: ``(T,)`` and ``k_pos``: ``(S,)`` positions.
            scale: the factor attention applies to ``q·k``.

        Returns:
            ``(B, H, T, S)``.
        """
        per_offset = q @ (scale * self.key_table.to(q.dtype)).T  # (B, H, T, 2K+1)
        index = self.bucket(q_pos, k_pos).to(q.device)
        return per_offset.gather(-1, index.expand(*q.shape[:2], *index.shape))

    def value_term(self, weights: Tensor, q_pos: Tensor, k_pos: Tensor) -> Tensor | None:
        """``Σ_j α_ij a^V_{ij}``.

        Args:
            weights: ``(B, H, T, S)`` attention weights α.

        Returns:
            ``(B, H, T, D)``, or ``None`` when built with ``values=False``.
        """
        if self.value_table is None:
            return None
        index = self.bucket(q_pos, k_pos).to(weights.device)
        buckets = weights.new_zeros(*weights.shape[:-1], self.value_table.shape[0])
        buckets = buckets.scatter_add(-1, index.expand_as(weights), weights)  # (B, H, T, 2K+1)
        return buckets @ self.value_table.to(weights.dtype)

    def extra_repr(self) -> str:
        return f"max_distance={self.max_distance}, values={self.value_table is not None}"
