"""The match function of the RNN encoder–decoder (lecture 003 §Machine Translation:
"match" between the decoder state z and every encoder state h, softmax, context vector;
Bahdanau et al. 2015, Luong et al. 2015).

One query per decoder step against the fixed states of its source: what the match reads
of the encoder states (:meth:`MatchAttention.keys`) is computed once per source and kept,
and the scores reuse :mod:`selfattn.attention.scores` (``dot``, ``scaled_dot``, and
:class:`~selfattn.attention.scores.AdditiveScore` from projected keys); Luong's
``general`` zᵀ W_a h is the dot score against W_a h.

The softmax may remember the previous step (location-aware or forward attention,
:mod:`selfattn.attention.alignment`): the weights of step t then also depend on α_{t-1},
which the decoder carries in its recurrent state.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from selfattn.attention.alignment import Alignment, AlignmentConfig
from selfattn.attention.scores import AdditiveScore, dot_score, scaled_dot_score

#: The match functions, by ``model.score`` name.
RNN_SCORES = ("dot", "scaled_dot", "general", "additive")


class MatchAttention(nn.Module):
    """match(z, h) for every encoder state, softmax over the real positions, context.

    Args:
        score: a key of :data:`RNN_SCORES`.
        dim: D, the size of decoder states and encoder states alike.
        alignment: ``content`` (default), ``location`` or ``forward``.
    """

    def __init__(self, score: str, dim: int, alignment: AlignmentConfig | None = None) -> None:
        super().__init__()
        if score not in RNN_SCORES:
            raise ValueError(f"unknown score {score!r}; choose one of {', '.join(RNN_SCORES)}")
        self.score = score
        self.scale = 1.0 / math.sqrt(dim)
        self.general = nn.Linear(dim, dim, bias=False) if score == "general" else None
        self.additive = AdditiveScore(dim) if score == "additive" else None
        alignment = alignment or AlignmentConfig()
        self.alignment = Alignment(alignment, dim) if alignment.kind != "content" else None

    def keys(self, memory: Tensor) -> Tensor:
        """What the scores read of the encoder states ``(B, S, D)``, computed once per
        source: W_a h (``general``), W_h h (``additive``), h itself otherwise."""
        if self.general is not None:
            return self.general(memory)
        if self.additive is not None:
            return self.additive.k_proj(memory)
        return memory

    def scores(self, query: Tensor, keys: Tensor) -> Tensor:
        """``(B, T, D)`` decoder states, ``(B, S, ·)`` :meth:`keys` → ``(B, T, S)``."""
        q, k = query.unsqueeze(1), keys.unsqueeze(1)  # one head: (B, 1, T, D), (B, 1, S, ·)
        if self.additive is not None:
            out = self.additive.from_projected_keys(q, k)
        elif self.score == "scaled_dot":
            out = scaled_dot_score(q, k, self.scale)
        else:  # dot, or general's zᵀ (W_a h)
            out = dot_score(q, k, 1.0)
        return out.squeeze(1)

    def forward(
        self,
        query: Tensor,
        keys: Tensor,
        memory: Tensor,
        padding: Tensor,
        previous: Tensor | None = None,
    ) -> tuple[Tensor, Tensor, Tensor | None]:
        """Decoder states ``(B, T, D)`` of T consecutive steps, :meth:`keys`, encoder
        states ``(B, S, D)``, their padding and, for a recurrent alignment, the step
        before's α ``(B, S)`` (``None`` before the first step) → the context ``(B, T, D)``,
        the weights α̂ ``(B, T, S)`` (0 at padding) and the last step's α ``(B, S)`` for
        the next call (``None`` for content attention)."""
        scores = self.scores(query, keys).masked_fill(padding[:, None, :], float("-inf"))
        if self.alignment is None:
            weights = torch.softmax(scores, dim=-1)
            return weights @ memory, weights, None
        before = None if previous is None else previous.unsqueeze(1)  # one head
        aligned, last = self.alignment(scores.unsqueeze(1), padding, before)
        weights = aligned.squeeze(1)
        return weights @ memory, weights, last.squeeze(1)
