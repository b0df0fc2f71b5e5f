"""Attention scores α_{i,j} = score(q^i, k^j) (lecture 000: "Dot-product" and "Additive").

A score is any callable ``score(q, k, scale) -> (B, H, T, S)`` over queries
``(B, H, T, D)`` and keys ``(B, H, S, D)``. The registry :data:`SCORES` holds the named
ones; ``"additive"`` has parameters of its own, so it is a module
(:class:`AdditiveScore`) that a caller builds once and passes in.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import Tensor, nn

ScoreFn = Callable[[Tensor, Tensor, float], Tensor]


def dot_score(q: Tensor, k: Tensor, scale: float) -> Tensor:
    """α_{i,j} = q^i · k^j (the lecture's dot-product; ``scale`` is ignored)."""
    return q @ k.transpose(-2, -1)


def scaled_dot_score(q: Tensor, k: Tensor, scale: float) -> Tensor:
    """α_{i,j} = q^i · k^j / √d (Vaswani et al. 2017); ``scale`` is 1/√d unless overridden."""
    # Scale q (T·D values) rather than the scores (T·S values): one fewer score-sized tensor.
    return (q * scale) @ k.transpose(-2, -1)


class AdditiveScore(nn.Module):
    """α_{i,j} = wᵀ tanh(W^q q^i + W^k k^j) — the lecture's "Additive" (Bahdanau et al. 2015).

    ``W[q; k]`` with one matrix W is the same as ``W^q q + W^k k``; splitting it lets the
    projections be computed once per position rather than once per pair. Pairs are still
    formed — a ``(B, H, T, S, hidden_dim)`` tensor — so :func:`selfattn.attention` calls it on
    chunks of queries to bound memory.

    Args:
        head_dim: D, the size of q and k.
        hidden_dim: size of the tanh layer (default: ``head_dim``).
    """

    def __init__(self, head_dim: int, hidden_dim: int | None = None) -> None:
        super().__init__()
        hidden_dim = hidden_dim or head_dim
        self.head_dim = head_dim
        self.hidden_dim = hidden_dim
        self.q_proj = nn.Linear(head_dim, hidden_dim, bias=False)
        self.k_proj = nn.Linear(head_dim, hidden_dim, bias=True)
        self.w = nn.Linear(hidden_dim, 1, bias=False)

    def forward(self, q: Tensor, k: Tensor, scale: float = 1.0) -> Tensor:
        """Args: q ``(B, H, T, D)``, k ``(B, H, S, D)``. Returns ``(B, H, T, S)``."""
        return self.from_projected_keys(q, self.k_proj(k))

    def from_projected_keys(self, q: Tensor, projected_keys: Tensor) -> Tensor:
        """The scores for keys already through ``k_proj`` ``(B, H, S, hidden_dim)``: a
        decoder that scores one query per step against fixed keys (an RNN decoder over
        its source) projects them once."""
        pair = torch.tanh(self.q_proj(q).unsqueeze(-2) + projected_keys.unsqueeze(-3))
        return self.w(pair).squeeze(-1)


SCORES: dict[str, ScoreFn | type[AdditiveScore]] = {
    "dot": dot_score,
    "scaled_dot": scaled_dot_score,
    "additive": AdditiveScore,
}

#: Scores that ``F.scaled_dot_product_attention`` computes itself (with the right scale).
FUSABLE_SCORES = {"dot", "scaled_dot"}


def resolve_score(score: str | ScoreFn | nn.Module) -> ScoreFn:
    """The score callable for a registry name or a callable; a clear error otherwise."""
    if callable(score):
        return score
    if score == "additive":
        raise ValueError(
            "score='additive' has its own parameters: pass an AdditiveScore(head_dim) "
            "instance as score=…, or use MultiHeadAttention(score='additive')"
        )
    fn = SCORES.get(score) if isinstance(score, str) else None
    if fn is None:
        raise ValueError(f"unknown score {score!r}; choose one of {sorted(SCORES)} or a callable")
    return fn  # type: ignore[return-value]


def default_scale(score: str | ScoreFn | nn.Module, head_dim: int) -> float:
    """1/√D for scaled dot product, 1 otherwise."""
    return 1.0 / math.sqrt(head_dim) if score == "scaled_dot" else 1.0
