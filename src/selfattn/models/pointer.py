"""The pointer network's attention (Vinyals et al. 2015, lecture 003 §Pointer Network):
scores from decoder states to source positions, which the pointer and copy outputs of
:class:`~selfattn.models.seq2seq.Seq2SeqTransformer` turn into distributions."""

from __future__ import annotations

import math

from torch import Tensor, nn


class PointerAttention(nn.Module):
    """One attention head from decoder states to source positions, returning scores.

    Vinyals et al. score with u_j = vᵀ tanh(W₁ e_j + W₂ d_i); here the scaled dot product
    of projections, which the lecture shows is the common choice and is cheaper.
    """

    def __init__(self, embed_dim: int) -> None:
        super().__init__()
        self.q_proj = nn.Linear(embed_dim, embed_dim)
        self.k_proj = nn.Linear(embed_dim, embed_dim)
        self.scale = 1.0 / math.sqrt(embed_dim)

    def forward(self, hidden: Tensor, memory: Tensor, padding: Tensor) -> Tensor:
        """``(B, T, E)``, ``(B, S, E)``, ``(B, S)`` → scores ``(B, T, S)``, −inf at padding."""
        scores = self.q_proj(hidden) @ self.k_proj(memory).transpose(1, 2) * self.scale
        return scores.masked_fill(padding[:, None, :], float("-inf"))
