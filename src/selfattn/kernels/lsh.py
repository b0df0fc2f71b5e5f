"""LSH attention: the Reformer (Kitaev, Kaiser & Levskaya, ICLR 2020, "Reformer: The
Efficient Transformer").

Softmax weights are dominated by the keys nearest the query, so only those are computed:

1. **hash** — angular LSH: a random rotation R (D × b/2) puts x in bucket
   ``argmax([xR, −xR])``; near directions tend to share a bucket;
2. **sort** the positions by (bucket, position) and cut them into chunks of c;
3. **attend** within a chunk and to the previous chunk, to same-bucket keys only;
4. **repeat** with ``num_hashes`` independent rotations and combine the rounds, each
   weighted by its softmax normaliser (``exp`` of its logsumexp), which is softmax over all
   the keys any round found (a key found twice counts twice, as in the reference code).

Keys are the queries normalised to unit length (shared-QK attention), so a query hashes
where its own key does, and a token does not attend to itself unless nothing else is
available (its score is replaced by −5·10⁴). Causal attention keeps keys j ≤ i by original
position. Cost, for r hashes into b buckets and chunks of c: attention O(r·L·c·D) time and
O(r·L·Dv + L·c) memory, hashing O(r·L·D·b) time and O(L·b) memory — with the paper's
b = 2L/c hashing grows as L²/c, yet stays below the attention's cost until L ≈ 2c².

Its weights are real softmax weights, over the keys each query met: asked for an attention
map, each round's chunk weights are scattered to their ``(L, L)`` positions and the rounds
combined with the same weights as the outputs, so ``map @ V`` is the output.
"""

from __future__ import annotations

import math
from typing import ClassVar

import torch
import torch.nn.functional as F
from torch import Tensor

from selfattn.attention.functional import attention, zero_padding
from selfattn.attention.kernel import AttentionKernel, AttentionRequest, Capability
from selfattn.kernels.base import register_kernel

__all__ = ["SELF_SCORE", "LSHKernel", "hash_buckets"]

#: A token's score for itself in shared-QK attention: exp of it underflows beside any real
#: key, yet keeps the token's own value when it has no other key (finite in float16).
SELF_SCORE = -5e4


def hash_buckets(x: Tensor, rotation: Tensor | None, num_buckets: int) -> Tensor:
    """Angular LSH: ``argmax([xR, −xR])`` over the ``num_buckets`` (even) half-rotations.

    Args:
        x: ``(B, H, L, D)``.
        rotation: R, ``(D, num_buckets / 2)``; ``None`` when ``num_buckets`` is 1.
        num_buckets: b.

    Returns:
        ``(B, H, L)`` bucket ids in ``0 … b−1``. Cost O(L·D·b) time, O(L·b) memory.
    """
    if rotation is None:
        return torch.zeros(x.shape[:3], dtype=torch.long, device=x.device)
    rotated = x @ rotation.to(x.dtype)  # (B, H, L, b/2)
    # argmax over [xR, −xR] without building it: the largest entry or the most negative one
    top, top_index = rotated.max(dim=-1)
    bottom, bottom_index = rotated.min(dim=-1)
    return torch.where(top >= -bottom, top_index, bottom_index + rotated.shape[-1])


@register_kernel
class LSHKernel(AttentionKernel):
    """Reformer LSH attention (Kitaev et al. 2020): softmax attention among same-bucket
    tokens of neighbouring chunks, over several hash rounds.

    Self-attention only (T = S). With ``shared_qk`` (the paper's choice) the ``k`` argument
    is ignored: keys are the queries normalised to unit length. With ``shared_qk=False``,
    q and k are hashed with the same rotations and sorted separately, and self-attention
    is not discouraged. ``key_padding_mask`` marks padded keys and (self-attention) padded
    queries: they are hashed to a bucket of their own, so they neither attend nor take up
    room in the chunks of real tokens, and their outputs are 0.

    The rotations are drawn from a generator seeded with ``seed`` for every call
    (deterministic); :meth:`redraw` moves to the next seed, which a training loop may call
    every step to resample them as the paper does.

    Cost O(r·L·(c + b)·D) time and O(r·L·Dv + L·(c + b)) memory for r = ``num_hashes``,
    c = ``chunk_size``, b buckets.

    Args:
        num_buckets: b, even, or 1 (every token in one bucket: exact attention within the
            chunks). ``None``: 1 when L ≤ c, else 2·⌈L/c⌉, the paper's rule (buckets of
            about c/2 tokens).
        num_hashes: r, rounds of hashing.
        chunk_size: c.
        shared_qk: keys are the normalised queries.
        seed: seeds the rotations.
    """

    name = "lsh"
    size_option = "num_buckets"
    supports_causal = True
    supports_weights = True  # sparse softmax weights, scattered to (L, L) when asked for
    supports_cross = False
    reasons: ClassVar[dict[Capability, str]] = {
        "mask": "it attends within hash buckets, with no (T, S) scores to mask",
        "scores": "it hashes by angle and uses scaled-dot softmax within buckets",
        "cache": "it hashes and sorts the whole sequence at once",
        "cross": "it sorts queries and keys of one sequence into shared buckets",
    }

    def __init__(
        self,
        num_buckets: int | None = None,
        num_hashes: int = 4,
        chunk_size: int = 64,
        shared_qk: bool = True,
        seed: int = 0,
    ) -> None:
        super().__init__()
        even = num_buckets is not None and num_buckets >= 2 and num_buckets % 2 == 0
        if num_buckets is not None and num_buckets != 1 and not even:
            raise ValueError(f"num_buckets must be 1 or even and positive, got {num_buckets}")
        if num_hashes < 1 or chunk_size < 1:
            raise ValueError(
                f"num_hashes and chunk_size must be >= 1, got {num_hashes}, {chunk_size}"
            )
        self.num_buckets = num_buckets
        self.num_hashes = num_hashes
        self.chunk_size = chunk_size
        self.shared_qk = shared_qk
        self.seed = seed

    def redraw(self) -> None:
        """Use new random rotations from now on."""
        self.seed += 1

    def buckets_for(self, length: int) -> int:
        """The number of buckets used for a sequence of ``length``."""
        if self.num_buckets is not None:
            return self.num_buckets
        return 1 if length <= self.chunk_size else 2 * math.ceil(length / self.chunk_size)

    def reference(
        self,
        q: Tensor,
        k: Tensor,
        v: Tensor,
        *,
        key_padding_mask: Tensor | None = None,
        causal: bool = False,
    ) -> Tensor:
        """Dense softmax attention as this kernel changes it: with ``shared_qk`` the keys are
        the normalised queries and a token attends to itself only when nothing else is
        visible. LSH attention with one bucket and one chunk equals it."""
        if not self.shared_qk:
            return super().reference(q, k, v, key_padding_mask=key_padding_mask, causal=causal)
        length = q.shape[2]
        visible = torch.ones(length, length, dtype=torch.bool, device=q.device)
        if causal:
            visible = visible.tril()
        if key_padding_mask is not None:
            visible = visible & ~key_padding_mask[:, None, None, :]  # (B, 1, L, L)
        own = torch.eye(length, dtype=torch.bool, device=q.device) & visible
        others = visible & ~own
        alone = ~others.any(dim=-1, keepdim=True)
        mask = others | (own & alone)
        keys = F.normalize(q, dim=-1)
        out, _ = attention(q, keys, v, mask=mask, key_padding_mask=key_padding_mask)
        return out

    def attend(
        self, q: Tensor, k: Tensor, v: Tensor, request: AttentionRequest
    ) -> tuple[Tensor, Tensor | None]:
        length, head_dim = q.shape[2], q.shape[3]
        pad = request.key_padding_mask
        if pad is not None:
            # Weight 0 times a padded NaN would still be NaN. Self-attention: a padded query
            # is a padded (shared) key too, and goes to the padding bucket whatever it holds.
            q, k, v = (zero_padding(t, pad) for t in (q, k, v))
        keys = F.normalize(q, dim=-1) if self.shared_qk else k
        num_buckets = self.buckets_for(length)
        generator = torch.Generator().manual_seed(self.seed)
        rotations = torch.randn(self.num_hashes, head_dim, num_buckets // 2, generator=generator)
        outputs, normalisers, maps = [], [], []
        for rotation in rotations.to(q.device):
            rotation_or_none = rotation if num_buckets > 1 else None
            q_buckets = hash_buckets(q, rotation_or_none, num_buckets)
            k_buckets = None if self.shared_qk else hash_buckets(k, rotation_or_none, num_buckets)
            out, lse, weights = _bucketed_attention(
                q,
                keys,
                v,
                q_buckets,
                k_buckets,
                padding=pad,
                padding_bucket=num_buckets,
                chunk_size=self.chunk_size,
                causal=request.causal,
                exclude_self=self.shared_qk,
                need_weights=request.need_weights,
            )
            outputs.append(out)
            normalisers.append(lse)
            maps.append(weights)
        round_weights = _round_weights(torch.stack(normalisers))  # (r, B, H, L)
        out = (round_weights[..., None] * torch.stack(outputs)).sum(dim=0)
        if not request.need_weights:
            return out, None
        weights = torch.stack([m for m in maps if m is not None])  # (r, B, H, L, L)
        return out, (round_weights[..., None] * weights).sum(dim=0)


def _bucketed_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    q_buckets: Tensor,
    k_buckets: Tensor | None,
    *,
    padding: Tensor | None,
    padding_bucket: int,
    chunk_size: int,
    causal: bool,
    exclude_self: bool,
    need_weights: bool = False,
) -> tuple[Tensor, Tensor, Tensor | None]:
    """One hash round: ``(out (B, H, L, Dv), logsumexp of each query's scores (B, H, L),
    this round's weights (B, H, L, L) if need_weights else None)``.

    Queries and keys (``k_buckets`` None: the queries' buckets) are sorted by (bucket,
    position); query chunk n attends to key chunks n − 1 and n, to keys of its own bucket
    only. Padded positions go to ``padding_bucket`` as queries, and match nothing as keys.
    """
    length = q.shape[2]
    pad = None if padding is None else padding[:, None, :].expand_as(q_buckets)
    if pad is not None:
        q_buckets = q_buckets.masked_fill(pad, padding_bucket)
        if k_buckets is not None:
            k_buckets = k_buckets.masked_fill(pad, padding_bucket)
    position = torch.arange(length, device=q.device)
    q_order = (q_buckets * length + position).argsort(dim=-1)  # (B, H, L)
    k_order = q_order if k_buckets is None else (k_buckets * length + position).argsort(dim=-1)
    k_buckets = q_buckets if k_buckets is None else k_buckets
    if pad is not None:
        k_buckets = k_buckets.masked_fill(pad, -1)  # padded keys match no query

    c = min(chunk_size, length)
    chunk_q = _chunks(_gather(q, q_order), c, 0)  # (B, H, n, c, D)
    chunk_q_pos = _chunks(q_order, c, -1)  # (B, H, n, c)
    chunk_q_bucket = _chunks(q_buckets.gather(-1, q_order), c, -2)
    chunk_k = _look_back(_chunks(_gather(k, k_order), c, 0))  # (B, H, n, w, D), w = c or 2c
    chunk_v = _look_back(_chunks(_gather(v, k_order), c, 0))
    chunk_k_pos = _look_back(_chunks(k_order, c, -1))
    chunk_k_bucket = _look_back(_chunks(k_buckets.gather(-1, k_order), c, -1), first=-1)

    scores = chunk_q @ chunk_k.transpose(-1, -2) / math.sqrt(q.shape[-1])  # (B, H, n, c, w)
    allowed = chunk_q_bucket[..., :, None] == chunk_k_bucket[..., None, :]
    if causal:
        allowed &= chunk_k_pos[..., None, :] <= chunk_q_pos[..., :, None]
    scores = scores.masked_fill(~allowed, -math.inf)
    if exclude_self:
        is_self = allowed & (chunk_k_pos[..., None, :] == chunk_q_pos[..., :, None])
        scores = scores.masked_fill(is_self, SELF_SCORE)

    probs, lse = _softmax(scores, allowed)  # (B, H, n, c, w), (B, H, n, c)
    out = probs @ chunk_v  # (B, H, n, c, Dv)
    batch, heads = q.shape[:2]
    out = out.reshape(batch, heads, -1, v.shape[-1])[:, :, :length]
    lse = lse.reshape(batch, heads, -1)[:, :, :length]
    unsort = q_order.argsort(dim=-1)
    weights = None
    if need_weights:
        weights = _scatter_weights(probs, chunk_q_pos, chunk_k_pos, length)
    return _gather(out, unsort), lse.gather(-1, unsort), weights


def _softmax(scores: Tensor, allowed: Tensor) -> tuple[Tensor, Tensor]:
    """Softmax over the last dim and the logsumexp of each row's scores; a row with no
    allowed key gets weights 0 and logsumexp −inf, with finite gradients."""
    has_key = allowed.any(dim=-1, keepdim=True)
    shift = scores.amax(dim=-1, keepdim=True).detach().masked_fill(~has_key, 0.0)
    exp_scores = torch.exp(scores - shift)
    total = exp_scores.sum(dim=-1, keepdim=True).masked_fill(~has_key, 1.0)
    lse = (total.log() + shift).masked_fill(~has_key, -math.inf)
    return exp_scores / total, lse.squeeze(-1)


def _scatter_weights(probs: Tensor, q_pos: Tensor, k_pos: Tensor, length: int) -> Tensor:
    """One round's chunk weights ``probs (B, H, n, c, w)`` at their positions: ``(B, H, L,
    L)``. Filler slots (position −1) carry weight 0 and are sent to position 0."""
    rows = q_pos[..., :, None].clamp_min(0)  # (B, H, n, c, 1)
    cols = k_pos[..., None, :].clamp_min(0)  # (B, H, n, 1, w)
    flat = (rows * length + cols).expand_as(probs).flatten(2)
    batch, heads = probs.shape[:2]
    dense = probs.new_zeros(batch, heads, length * length)
    return dense.scatter_add(-1, flat, probs.flatten(2)).view(batch, heads, length, length)


def _round_weights(normalisers: Tensor) -> Tensor:
    """``(r, B, H, L)``: each round's share, softmax over rounds of its logsumexp, so that
    Σ_r share_r · out_r is softmax over every key any round found."""
    nothing = torch.isinf(normalisers).all(dim=0, keepdim=True)  # no key in any round
    return torch.softmax(normalisers.masked_fill(nothing, 0.0), dim=0)


def _gather(x: Tensor, index: Tensor) -> Tensor:
    """``x[b, h, index[b, h, i]]`` for ``x (B, H, L, E)``, ``index (B, H, L)``."""
    return x.gather(2, index[..., None].expand(*index.shape, x.shape[-1]))


def _chunks(x: Tensor, chunk_size: int, fill: float) -> Tensor:
    """Split dim 2 into ``(n, c)`` chunks, the last padded with ``fill`` (``(B, H, L, …)``)."""
    length = x.shape[2]
    n = -(-length // chunk_size)
    extra = n * chunk_size - length
    if extra:
        filler = x.new_full((*x.shape[:2], extra, *x.shape[3:]), fill)
        x = torch.cat([x, filler], dim=2)
    return x.reshape(*x.shape[:2], n, chunk_size, *x.shape[3:])


def _look_back(x: Tensor, first: float | None = None) -> Tensor:
    """Each chunk preceded by the previous one: ``(B, H, n, c, …)`` → ``(B, H, n, 2c, …)``
    (unchanged when n = 1). Chunk 0 has no previous chunk: its first half is filled with
    ``first`` (a bucket id that matches nothing) when given."""
    if x.shape[2] == 1:
        return x
    previous = x.roll(1, dims=2)
    if first is not None:
        previous[:, :, 0] = first
    return torch.cat([previous, x], dim=3)
