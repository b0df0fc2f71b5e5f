"""The attention kernel: b^i = Σ_j α'_{i,j} v^j with α'_{i,j} = f(score(q^i, k^j)).

Lecture 000 (§Self-attention, matrix form): ``O = V · softmax(Kᵀ Q)``. Here tensors are
batched and multi-headed, ``(B, H, L, D)``, and the matrix form reads
``O = f(score(Q, K) + bias) · V`` with masked keys removed before f.

Two paths compute the same thing:

* **fused** — scaled (or plain) dot product with softmax and no weights requested goes to
  ``torch.nn.functional.scaled_dot_product_attention``, PyTorch's fused kernels;
* **chunked eager** — every other combination (additive scores, ReLU/sigmoid/custom
  normalisers, or weights requested) follows the formula literally, one block of queries
  at a time so the ``(T, S)`` score matrix (and, for additive scores, the
  ``(T, S, hidden)`` pair tensor) never exists whole. Under autograd each block is
  recomputed in the backward pass (activation checkpointing) so training memory stays
  bounded too.

A query with nothing to attend to (every key masked) gets a zero output and finite
gradients on both paths. Padded keys and values are set to zero first
(:func:`zero_padding`): a masked weight is exactly 0, but 0 · NaN is NaN, so whatever the
padding holds must not reach the product.
"""

from __future__ import annotations

import functools
import math

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.utils.checkpoint import checkpoint

from selfattn.attention.checks import check_attention_inputs
from selfattn.attention.dropout import DropoutMasks, draws_uniform, dropout_of
from selfattn.attention.masks import structural_mask
from selfattn.attention.normalizers import NORMALIZERS, NormalizerFn, resolve_normalizer, softmax
from selfattn.attention.scores import (
    FUSABLE_SCORES,
    AdditiveScore,
    ScoreFn,
    default_scale,
    dot_score,
    resolve_score,
    scaled_dot_score,
)

#: Scores that are one matrix product of (scaled) q and k.
_PRODUCT_SCORES = (dot_score, scaled_dot_score)
#: Elements of one block's score matrix (B·H·chunk·S·extra); 2^24 fp32 values = 64 MiB.
CHUNK_BUDGET = 1 << 24
#: Blocks are recomputed in the backward pass only when keeping every block's activations
#: would cost more than this many elements (2^26 fp32 = 256 MiB per saved tensor). Below it,
#: recomputation costs ~1.45x the time to save a few hundred MiB (benchmarks/attention.py).
RECOMPUTE_BUDGET = 1 << 26


def attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    *,
    score: str | ScoreFn | AdditiveScore = "scaled_dot",
    normalizer: str | NormalizerFn = "softmax",
    mask: Tensor | None = None,
    key_padding_mask: Tensor | None = None,
    causal: bool = False,
    window: int | None = None,
    include_self: bool = True,
    need_weights: bool = False,
    dropout: float = 0.0,
    scale: float | None = None,
    chunk_size: int | None = None,
    dropout_masks: DropoutMasks = "bernoulli",
) -> tuple[Tensor, Tensor | None]:
    """Self- or cross-attention over batched, multi-head tensors.

    Args:
        q: queries ``(B, H, T, D)``.
        k: keys ``(B, Hk, S, D)``; ``H`` must be a multiple of ``Hk`` (grouped-query).
        v: values ``(B, Hk, S, Dv)``.
        score: ``"scaled_dot"`` (default), ``"dot"``, an :class:`AdditiveScore` module, or
            any callable ``(q, k, scale) -> (B, H, T, S)``.
        normalizer: ``"softmax"`` (default), ``"relu"``, ``"sigmoid"`` or a callable
            applied over the last (key) dimension.
        mask: boolean (True = may attend) or additive float mask, broadcastable to
            ``(B, H, T, S)``. A float mask is added to the scores (relative positional
            biases use this); ``-inf`` entries count as masked.
        key_padding_mask: ``(B, S)`` boolean, **True at padding** (as in
            ``torch.nn.MultiheadAttention``). Padded keys and values may hold anything,
            NaN and inf included: they are zeroed before use.
        causal: query i sees only keys j ≤ i (bottom-right aligned when T < S).
        window: truncated attention: only keys with |i − j| ≤ window.
        include_self: False forbids attending to one's own position.
        need_weights: also return the normalised weights ``(B, H, T, S)`` (before dropout).
        dropout: dropout probability on the weights (pass 0.0 in evaluation).
        scale: factor on ``q·k`` for ``scaled_dot`` (default 1/√D).
        chunk_size: queries per block on the eager path (default: sized to
            :data:`CHUNK_BUDGET`).
        dropout_masks: how the dropout on the weights draws its masks
            (:mod:`selfattn.attention.dropout`): ``"bernoulli"``, PyTorch's, or
            ``"uniform"``, cheaper on CPU, which takes the eager path (PyTorch's fused
            kernels draw their own masks).

    Returns:
        ``(output, weights)``: output ``(B, H, T, Dv)``; weights ``(B, H, T, S)`` when
        ``need_weights`` else ``None``.
    """
    check_attention_inputs(q, k, v, mask, key_padding_mask, window, dropout, chunk_size)
    head_dim = q.shape[-1]
    if scale is None:
        scale = default_scale(score, head_dim)
    allowed_user, bias = _split_mask(mask, key_padding_mask)
    if key_padding_mask is not None:
        k, v = zero_padding(k, key_padding_mask), zero_padding(v, key_padding_mask)
    # PyTorch's CPU kernels have no fused dropout: SDPA with dropout_p > 0 falls back to
    # the math path, which holds B·H·T·S weights (6.9 GB for one 4k-token training batch
    # of 4 in lra-text). The chunked path applies the same dropout block by block.
    dropout_unfused = dropout > 0.0 and (
        draws_uniform(dropout_masks, q.device) or (q.device.type == "cpu" and _is_long(q, k))
    )
    if _is_fusable(score, normalizer) and not need_weights and not dropout_unfused:
        out = _fused(q, k, v, allowed_user, bias, causal, window, include_self, dropout, scale)
        return out, None
    return _chunked(
        q,
        k,
        v,
        score=resolve_score(score),
        normalizer=resolve_normalizer(normalizer),
        allowed_user=allowed_user,
        bias=bias,
        causal=causal,
        window=window,
        include_self=include_self,
        need_weights=need_weights,
        dropout=dropout,
        scale=scale,
        chunk_size=chunk_size or _auto_chunk(q, k, score),
        dropout_masks=dropout_masks,
    )


def _is_long(q: Tensor, k: Tensor) -> bool:
    """Whether the full weight matrix would exceed one chunk's budget."""
    return q.shape[0] * q.shape[1] * q.shape[-2] * k.shape[-2] > CHUNK_BUDGET


def _is_fusable(score: object, normalizer: object) -> bool:
    fusable_score = isinstance(score, str) and score in FUSABLE_SCORES
    return fusable_score and (normalizer == "softmax" or normalizer is NORMALIZERS["softmax"])


# --------------------------------------------------------------------------- masks


def _split_mask(
    mask: Tensor | None, key_padding_mask: Tensor | None
) -> tuple[Tensor | None, Tensor | None]:
    """The user's masks as (boolean allowed, additive float bias); either may be None."""
    allowed: Tensor | None = None
    bias: Tensor | None = None
    if mask is not None:
        if mask.dtype == torch.bool:
            allowed = mask
        else:
            bias = mask
    if key_padding_mask is not None:
        keep = ~key_padding_mask[:, None, None, :]
        allowed = keep if allowed is None else allowed & keep
    return allowed, bias


def zero_padding(t: Tensor, key_padding_mask: Tensor) -> Tensor:
    """``t (B, H, S, X)`` with 0 at the positions ``key_padding_mask (B, S)`` marks.

    Masking alone does not protect real rows from what padding holds: a masked weight is 0,
    but 0 · NaN = NaN in ``weights @ V``, and a NaN or inf key makes a NaN score that an
    additive ``-inf`` mask keeps (NaN + −inf = NaN), forward and backward. Zeroed, padding
    holding anything gives the result it gives holding zeros, for O(B·H·S·X) beside
    attention's O(T·S).
    """
    # One pass: ``masked_fill`` (out of place) copies, then fills, which takes twice as long.
    return torch.where(key_padding_mask[:, None, :, None], 0.0, t)  # (B, 1, S, 1) broadcast


def _and(a: Tensor | None, b: Tensor | None) -> Tensor | None:
    if a is None:
        return b
    if b is None:
        return a
    return a & b


def _rows(t: Tensor | None, start: int, stop: int) -> Tensor | None:
    """Rows ``start:stop`` of a mask broadcastable over the query dimension."""
    if t is None or t.dim() < 2 or t.shape[-2] == 1:
        return t
    return t[..., start:stop, :]


def _zero_empty_rows(out: Tensor, allowed: Tensor | None, bias: Tensor | None) -> Tensor:
    """Zero the outputs of queries that had no key to attend to."""
    if bias is not None:
        finite = ~torch.isneginf(bias)
        allowed = finite if allowed is None else allowed & finite
    if allowed is None:
        return out
    has_key = allowed.any(dim=-1, keepdim=True)
    # Usually every query has a key: on CPU, checking is free and saves a pass over the
    # output (forward and backward); on a GPU it would cost a synchronisation, and a
    # compiled or exported graph cannot branch on values (its compiler fuses the pass).
    if out.device.type == "cpu" and not torch.compiler.is_compiling() and bool(has_key.all()):
        return out
    return torch.where(has_key, out, 0.0)


# --------------------------------------------------------------------------- fused path


def _fused(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    allowed_user: Tensor | None,
    bias: Tensor | None,
    causal: bool,
    window: int | None,
    include_self: bool,
    dropout: float,
    scale: float,
) -> Tensor:
    num_queries, num_keys = q.shape[-2], k.shape[-2]
    gqa = bool(q.shape[1] != k.shape[1])  # a plain bool under symbolic shapes too
    plain_causal = (
        causal
        and num_queries == num_keys
        and window is None
        and include_self
        and allowed_user is None
        and bias is None
    )
    if plain_causal:
        return F.scaled_dot_product_attention(
            q, k, v, dropout_p=dropout, is_causal=True, scale=scale, enable_gqa=gqa
        )
    structure = structural_mask(
        num_queries,
        num_keys,
        causal=causal,
        window=window,
        include_self=include_self,
        device=q.device,
    )
    allowed = _and(structure, allowed_user)
    attn_mask: Tensor | None = allowed
    if bias is not None:
        attn_mask = bias if allowed is None else bias.masked_fill(~allowed, -math.inf)
    out = F.scaled_dot_product_attention(
        q, k, v, attn_mask=attn_mask, dropout_p=dropout, scale=scale, enable_gqa=gqa
    )
    return _zero_empty_rows(out, allowed, bias)


# --------------------------------------------------------------------------- eager path


def _auto_chunk(q: Tensor, k: Tensor, score: object) -> int:
    batch, heads, num_queries = q.shape[:3]
    per_query = batch * heads * k.shape[-2]
    if isinstance(score, AdditiveScore):
        per_query *= score.hidden_dim
    return max(1, min(num_queries, CHUNK_BUDGET // max(per_query, 1)))


def _attend_block(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    allowed: Tensor | None,
    bias: Tensor | None,
    *,
    score: ScoreFn,
    normalizer: NormalizerFn,
    scale: float,
    dropout: float,
    dropout_masks: DropoutMasks = "bernoulli",
) -> tuple[Tensor, Tensor]:
    """The lecture's formula for one block of queries: returns (output, weights)."""
    scores = score(q, k, scale)  # (B, H, c, S)
    # A product's fresh output, which nothing saved for backward, may be masked in place
    # (one score-sized copy fewer); another score's output may be what its backward reads.
    owned = score in _PRODUCT_SCORES
    if bias is not None:
        scores, owned = scores + bias, True
        finite = ~torch.isneginf(bias)
        allowed = finite if allowed is None else allowed & finite
    refill = False
    if allowed is not None:
        masked = scores.masked_fill_ if owned else scores.masked_fill
        scores = masked(~allowed, -math.inf)
        has_key = allowed.any(dim=-1, keepdim=True)  # usually (B, 1, 1, 1): cheap to check
        # softmax sends -inf to exactly 0; another normaliser, or a row with no key at all
        # (softmax(-inf, …) = NaN), needs its masked weights zeroed after normalising.
        # Skipping these two full-size passes when neither applies halves the masking
        # cost of long CPU training steps (attention dropout takes this path there).
        # A compiled or exported graph cannot branch on values: it always refills (same
        # output).
        refill = (
            normalizer is not softmax or torch.compiler.is_compiling() or not bool(has_key.all())
        )
        if refill:
            # Finite scores for key-less rows; their weights are zeroed below, so their
            # output is 0 and their gradient finite.
            scores = scores.masked_fill(~has_key, 0.0)
    weights = normalizer(scores)
    if refill:
        assert allowed is not None
        weights = weights.masked_fill(~allowed, 0.0)
    dropped = dropout_of(weights, dropout, dropout_masks) if dropout > 0.0 else weights
    return dropped @ v, weights


def _chunked(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    *,
    score: ScoreFn,
    normalizer: NormalizerFn,
    allowed_user: Tensor | None,
    bias: Tensor | None,
    causal: bool,
    window: int | None,
    include_self: bool,
    need_weights: bool,
    dropout: float,
    scale: float,
    chunk_size: int,
    dropout_masks: DropoutMasks = "bernoulli",
) -> tuple[Tensor, Tensor | None]:
    heads, num_queries, num_keys = q.shape[1], q.shape[2], k.shape[2]
    if k.shape[1] != heads:  # grouped-query: each key/value head serves H / Hk query heads
        k = k.repeat_interleave(heads // k.shape[1], dim=1)
        v = v.repeat_interleave(heads // v.shape[1], dim=1)
    block = functools.partial(
        _attend_block,
        score=score,
        normalizer=normalizer,
        scale=scale,
        dropout=dropout,
        dropout_masks=dropout_masks,
    )
    saved_elements = q.shape[0] * heads * num_queries * num_keys
    if isinstance(score, AdditiveScore):
        saved_elements *= score.hidden_dim
    recompute = (
        not need_weights
        and num_queries > chunk_size
        and saved_elements > RECOMPUTE_BUDGET
        and torch.is_grad_enabled()
        and any(t.requires_grad for t in (q, k, v))
    )
    outputs, all_weights = [], []
    # Chunks only save memory; a compiled or exported graph with a dynamic length is one
    # block (its chunk count would depend on the length).
    exporting = torch.compiler.is_compiling()
    starts = [0] if exporting else range(0, num_queries, chunk_size)
    for start in starts:
        stop = num_queries if exporting else min(num_queries, start + chunk_size)
        structure = structural_mask(
            stop - start,
            num_keys,
            causal=causal,
            window=window,
            include_self=include_self,
            device=q.device,
            query_offset=num_keys - num_queries + start,
        )
        allowed = _and(structure, _rows(allowed_user, start, stop))
        args = (q[:, :, start:stop], k, v, allowed, _rows(bias, start, stop))
        if recompute:
            out, weights = checkpoint(block, *args, use_reentrant=False)
        else:
            out, weights = block(*args)
        outputs.append(out)
        if need_weights:
            all_weights.append(weights)
    output = outputs[0] if len(outputs) == 1 else torch.cat(outputs, dim=2)
    if not need_weights:
        return output, None
    return output, all_weights[0] if len(all_weights) == 1 else torch.cat(all_weights, dim=2)
