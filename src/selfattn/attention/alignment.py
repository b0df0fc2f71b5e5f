"""Alignments that remember the previous step: location-aware attention (Chorowski et al.
2015, "Attention-Based Models for Speech Recognition", §2.2) and forward attention (Zhang,
Ling & Dai 2018, "Forward attention in sequence-to-sequence acoustic modelling for speech
synthesis", §3), for a decoder's cross-attention (lecture 003's "match" family, beside the
guided-attention loss of :mod:`selfattn.tasks.seq2seq.losses`).

A content-only attention scores every decoder step t against every source position j from
the query and the key alone: α_t = softmax_j(e_{t,j}). Both variants here also read α_{t-1},
the alignment of the step before, so the step-t weights follow a recurrence over t:

* ``location``: f_t = F * α_{t-1} is a 1-D convolution of the previous alignment with k
  filters of width r (``(B, S)`` → ``(B, S, k)``), and the score gains a *location term*
  e_{t,j} = content(q_t, k_j) + wᵀ tanh(U f_{t,j}) with U ∈ R^{d×k}, w ∈ R^d (no biases).
  Chorowski et al. put U f_{t,j} inside the tanh of an additive score; the separate term is
  the same idea for every content score (dot, general, scaled-dot, additive), and with
  F = 0 it is exactly 0, so the attention is exactly content-only. α_{-1} is uniform over
  the source's real positions (ESPnet's AttLoc).
* ``forward``: y_t = softmax_j(e_{t,j}) is the content attention and
  α̂_t(n) ∝ (α̂_{t-1}(n) + α̂_{t-1}(n-1)) · y_t(n), renormalised over n, with α̂_{-1} the
  one-hot at source position 0: the posterior over monotonic paths that start at
  position 0 and, each step, stay or move one position right (Zhang et al.'s eq. 10–12,
  without the transition agent). ``max_advance = m`` lets a step move up to m positions,
  α̂_t(n) ∝ Σ_{d=0..m} α̂_{t-1}(n-d) · y_t(n) (m = 1 is the paper): a decoder that emits
  far fewer steps than it has source positions (speech → digits, S ≈ 15·T) cannot get
  past position T·m, so it needs m > 1. It is computed as
  softmax_n(e_{t,n} + log Σ_d α̂_{t-1}(n-d)) — the same normalised product, without
  products of many small numbers — with log 0 = −inf outside the reachable positions.

Training (teacher forcing) and decoding run the same recurrence: under teacher forcing
every query is known, the scores of all steps are computed at once and only the
recurrence loops over t; an incremental decoder keeps α_{t-1} in its decoding cache
(reordered with the beams). With several heads every head keeps its own alignment (the
convolution, U and w are shared by the heads of one layer).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from selfattn.attention.cache import KVCache
from selfattn.attention.dropout import dropout_of
from selfattn.attention.multihead import MultiHeadAttention
from selfattn.attention.scores import default_scale, resolve_score

AlignmentName = Literal["content", "location", "forward"]
#: The alignments, by ``seq2seq.alignment`` name.
ALIGNMENTS: tuple[AlignmentName, ...] = ("content", "location", "forward")


@dataclass(frozen=True)
class AlignmentConfig:
    """Which alignment a cross-attention keeps, and its sizes.

    Attributes:
        kind: ``content`` (no memory of the previous step), ``location`` or ``forward``.
        filters: k, the location convolution's filters.
        width: r, the location convolution's width (odd: centred on each position).
        max_advance: m, the forward alignment's longest move per step (1: Zhang et al.).
    """

    kind: AlignmentName = "content"
    filters: int = 10
    width: int = 15
    max_advance: int = 1

    def __post_init__(self) -> None:
        if self.kind not in ALIGNMENTS:
            choices = ", ".join(ALIGNMENTS)
            raise ValueError(f"unknown alignment {self.kind!r}; choose one of {choices}")
        if self.filters < 1 or self.width < 1 or self.width % 2 == 0:
            raise ValueError(
                "location filters must be >= 1 and width odd >= 1, got "
                f"{self.filters}, {self.width}"
            )
        if self.max_advance < 1:
            raise ValueError(f"forward max_advance must be >= 1, got {self.max_advance}")


class LocationTerm(nn.Module):
    """wᵀ tanh(U (F * α)) per source position: Chorowski et al.'s location features.

    Args:
        filters: k, the convolution's filters.
        width: r, their width (odd).
        hidden_dim: d, the size of U's output.
    """

    def __init__(self, filters: int, width: int, hidden_dim: int) -> None:
        super().__init__()
        self.conv = nn.Conv1d(1, filters, width, padding=width // 2, bias=False)  # F
        self.proj = nn.Linear(filters, hidden_dim, bias=False)  # U
        self.w = nn.Linear(hidden_dim, 1, bias=False)

    def forward(self, previous: Tensor) -> Tensor:
        """``(N, S)`` previous alignments → ``(N, S)`` location scores."""
        features = self.conv(previous.unsqueeze(1)).transpose(1, 2)  # (N, S, k)
        return self.w(torch.tanh(self.proj(features))).squeeze(-1)


class Alignment(nn.Module):
    """The normaliser of a cross-attention that reads the previous step's alignment.

    Args:
        config: the alignment and its sizes.
        hidden_dim: d of the location term (unused otherwise).
    """

    def __init__(self, config: AlignmentConfig, hidden_dim: int) -> None:
        super().__init__()
        self.config = config
        self.kind = config.kind
        self.location = (
            LocationTerm(config.filters, config.width, hidden_dim)
            if config.kind == "location"
            else None
        )

    @property
    def recurrent(self) -> bool:
        """Whether step t reads step t − 1 (everything but ``content``)."""
        return self.kind != "content"

    def initial(self, padding: Tensor, heads: int, dtype: torch.dtype) -> Tensor:
        """α_{-1} ``(B, H, S)`` for sources with ``padding`` ``(B, S)``: uniform over the
        real positions (``location``) or the one-hot at position 0 (``forward``)."""
        real = (~padding).to(dtype)
        if self.kind == "forward":
            start = torch.zeros_like(real)
            start[:, 0] = 1.0
            real = start
        real = real / real.sum(-1, keepdim=True).clamp(min=1.0)
        return real[:, None, :].expand(-1, heads, -1).contiguous()

    def forward(
        self, scores: Tensor, padding: Tensor, previous: Tensor | None
    ) -> tuple[Tensor, Tensor]:
        """Normalise the content scores of T consecutive steps, one step at a time.

        Args:
            scores: ``(B, H, T, S)`` content scores e_{t,j}, −inf at masked keys.
            padding: ``(B, S)`` True at source padding.
            previous: ``(B, H, S)`` α of the step before the first one, or ``None``
                (the first decoder step: :meth:`initial`).

        Returns:
            ``(weights (B, H, T, S), last (B, H, S))``: every step's alignment (rows sum to
            1, 0 at masked keys) and the last one, for the next call.
        """
        batch, heads, steps, length = scores.shape
        if previous is None:
            previous = self.initial(padding, heads, scores.dtype)
        rows = []
        for t in range(steps):
            rows.append(self.step(scores[:, :, t], previous))
            previous = rows[-1]
        if not rows:
            return scores.new_zeros(batch, heads, 0, length), previous
        return torch.stack(rows, dim=2), previous

    def step(self, scores: Tensor, previous: Tensor) -> Tensor:
        """One step: ``(B, H, S)`` content scores and α_{t-1} → α_t ``(B, H, S)``."""
        if self.location is not None:
            term = self.location(previous.flatten(0, 1)).view_as(previous)
            return torch.softmax(scores + term.to(scores.dtype), dim=-1)
        if self.kind == "forward":
            # Σ_{d=0..m} α_{t-1}(n − d): a sum of non-negative terms, exactly 0 where none
            # reaches (a ones-filter over the left-padded alignment, not a cumsum difference).
            shifted = F.pad(previous.flatten(0, 1).unsqueeze(1), (self.config.max_advance, 0))
            ones = previous.new_ones(1, 1, self.config.max_advance + 1)
            reach = F.conv1d(shifted, ones).view_as(previous)
            prior = torch.where(
                reach > 0, reach.clamp(min=torch.finfo(reach.dtype).tiny).log(), float("-inf")
            )
            return torch.softmax(scores + prior.to(scores.dtype), dim=-1)
        return torch.softmax(scores, dim=-1)


def aligned_attention(
    attn: MultiHeadAttention,
    alignment: Alignment,
    query: Tensor,
    memory: Tensor,
    *,
    key_padding_mask: Tensor | None = None,
    mask: Tensor | None = None,
    need_weights: bool = False,
    cache: KVCache | None = None,
) -> tuple[Tensor, Tensor | None]:
    """``attn``'s cross-attention with ``alignment`` in place of its softmax.

    The projections, heads, score and weight dropout are ``attn``'s; the weights come from
    the recurrence of :class:`Alignment`, written out eagerly (the fused kernels have no
    recurrence over queries).

    Args:
        attn: the cross-attention (softmax normaliser).
        alignment: its alignment (a recurrent one: ``location`` or ``forward``).
        query: ``(B, T, E)`` decoder states: T consecutive steps.
        memory: ``(B, S, Em)`` encoder output.
        key_padding_mask: ``(B, S)`` True at source padding.
        mask: extra mask, boolean (True = may attend) or additive, broadcastable to
            ``(B, H, T, S)``.
        need_weights: also return the weights ``(B, H, T, S)``.
        cache: a static cross-attention cache: the memory's keys and values are projected
            once, and :attr:`KVCache.alignment` carries α_{t-1} from one call to the next.

    Returns:
        ``(output (B, T, E), weights or None)``.
    """
    q = attn._split_heads(attn.q_proj(query), attn.num_heads)  # (B, H, T, D)
    if cache is not None and cache.key is not None and cache.value is not None:
        k, v = cache.key, cache.value
    else:
        k = attn._split_heads(attn.k_proj(memory), attn.num_kv_heads)  # (B, Hk, S, D)
        v = attn._split_heads(attn.v_proj(memory), attn.num_kv_heads)
        if cache is not None:
            k, v = cache.append(k, v)
    if attn.num_kv_heads != attn.num_heads:  # grouped-query: each query head's keys
        k = k.repeat_interleave(attn.num_heads // attn.num_kv_heads, dim=1)
        v = v.repeat_interleave(attn.num_heads // attn.num_kv_heads, dim=1)
    score = resolve_score(attn.score)
    scores = score(q, k, default_scale(attn.score, attn.head_dim))  # (B, H, T, S)
    batch, length = memory.shape[0], k.shape[2]
    if key_padding_mask is None:
        key_padding_mask = torch.zeros(batch, length, dtype=torch.bool, device=q.device)
    scores = scores.masked_fill(key_padding_mask[:, None, None, :], float("-inf"))
    if mask is not None:
        scores = (
            scores.masked_fill(~mask, float("-inf")) if mask.dtype == torch.bool else scores + mask
        )
    previous = None if cache is None else cache.alignment
    weights, last = alignment(scores, key_padding_mask, previous)
    if cache is not None:
        cache.alignment = last
    dropped = weights
    if attn.training and attn.dropout > 0:  # the dense kernel's masks (model.dropout_masks)
        dropped = dropout_of(
            weights, attn.dropout, getattr(attn.kernel, "dropout_masks", "bernoulli")
        )
    out = attn.out_proj((dropped.to(v.dtype) @ v).transpose(1, 2).flatten(2))  # (B, T, E)
    return out, weights if need_weights else None
