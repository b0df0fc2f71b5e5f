"""Sampling: "add noise" at inference (lecture 001 §5.4).

The lecture's text-to-speech example: the most probable output sounds least human, and
some randomness at test time helps wherever the task wants creativity rather than the one
right answer. Each step draws the next token from the model's distribution, reshaped by

* temperature τ: softmax(log p / τ); τ < 1 sharpens, τ → 0 becomes argmax (greedy);
* top-k: only the k most probable tokens stay (Fan et al. 2018);
* top-p, nucleus: only the smallest set of most probable tokens whose mass reaches p
  stays (Holtzman et al. 2020),

applied in that order, on the log-probabilities left after banned ids were set to −inf.
"""

from __future__ import annotations

from typing import Unpack

import torch
import torch.nn.functional as F
from torch import Tensor

from selfattn.decoding.common import NEG_INF, DecodeResult
from selfattn.decoding.greedy import DecodeLimits, autoregressive
from selfattn.models.encoder_decoder import EncoderDecoder
from selfattn.models.seq2seq_outputs import EncodedSource


def filter_top_k(logits: Tensor, k: int) -> Tensor:
    """−inf everywhere but each row's ``k`` largest entries (ties with the k-th stay).

    Args:
        logits: ``(..., V)`` log-probabilities or logits; −inf entries are fine.
        k: tokens to keep, ≥ 1 (more than V keeps all).
    """
    if k < 1:
        raise ValueError(f"top_k must be at least 1, got {k}")
    k = min(k, logits.shape[-1])
    kth = logits.topk(k, dim=-1).values[..., -1:]
    return logits.masked_fill(logits < kth, NEG_INF)


def filter_top_p(logits: Tensor, p: float) -> Tensor:
    """−inf outside each row's nucleus: the fewest most probable tokens of mass ≥ ``p``.

    A token stays when the tokens more probable than it hold less than ``p`` together, so
    the most probable token always stays.

    Args:
        logits: ``(..., V)`` log-probabilities or logits, at least one finite per row.
        p: in (0, 1]; 1 keeps every token of non-zero probability.
    """
    if not 0.0 < p <= 1.0:
        raise ValueError(f"top_p must be in (0, 1], got {p}")
    sorted_logits, order = logits.sort(dim=-1, descending=True)
    probs = sorted_logits.softmax(dim=-1)
    # Exclusive cumulative sum: the mass of the strictly more probable tokens.
    before = F.pad(probs.cumsum(dim=-1)[..., :-1], (1, 0))
    drop_sorted = before >= p
    drop = torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)
    return logits.masked_fill(drop, NEG_INF)


def check_sampling(temperature: float, top_k: int | None, top_p: float | None) -> None:
    """Refuse a temperature ≤ 0, a top-k < 1 or a top-p outside (0, 1] in one line."""
    if not temperature > 0.0:
        raise ValueError(
            f"temperature must be > 0 for sampling, got {temperature} (use greedy for argmax)"
        )
    if top_k is not None and top_k < 1:
        raise ValueError(f"top_k must be at least 1, got {top_k}")
    if top_p is not None and not 0.0 < top_p <= 1.0:
        raise ValueError(f"top_p must be in (0, 1], got {top_p}")


def sample(
    model: EncoderDecoder,
    encoded: EncodedSource,
    *,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    generator: torch.Generator | None = None,
    **limits: Unpack[DecodeLimits],
) -> DecodeResult:
    """Ancestral sampling: draw each token from the tempered, filtered distribution.

    Args:
        model: the encoder–decoder, in eval mode.
        encoded: ``(B, S, E)`` from ``model.encode``.
        temperature: τ > 0; small τ approaches greedy decoding.
        top_k: keep the k most probable tokens each step (``None``: all).
        top_p: keep the nucleus of mass ``top_p`` each step (``None``: all).
        generator: source of randomness (on the model's device) for reproducible draws;
            the draws of a row depend on which rows of the batch are still decoding.
        limits: ``max_len`` (required), ``min_len``, ``num_extended``, ``use_cache``: see
            :class:`~selfattn.decoding.greedy.DecodeLimits`.

    Returns:
        A :class:`DecodeResult` whose log-probabilities are the model's own (before
        temperature and filtering).

    Raises:
        ValueError: a bad ``max_len``/``min_len``, ``temperature`` ≤ 0, ``top_k`` < 1 or
            ``top_p`` outside (0, 1].
    """
    check_sampling(temperature, top_k, top_p)

    def choose(allowed: Tensor) -> Tensor:
        logits = allowed / temperature
        if top_k is not None:
            logits = filter_top_k(logits, top_k)
        if top_p is not None and top_p < 1.0:
            logits = filter_top_p(logits, top_p)
        probs = logits.softmax(dim=-1)
        return torch.multinomial(probs, 1, generator=generator).squeeze(1)

    return autoregressive(model, encoded, choose, **limits)
