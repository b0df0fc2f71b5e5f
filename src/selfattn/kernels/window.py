"""Truncated (windowed, banded) self-attention in O(L·w) time and memory.

Lecture 000 (§Truncated self-attention): for speech, query i attends only to the keys
within a window around it, |i − j| ≤ w, so the work per query is 2w + 1 keys instead of L
(the "local attention" / sliding window of the Image Transformer, Parmar et al. 2018, and
Longformer, Beltagy et al. 2020). The result is *exactly*
``attention(q, k, v, window=w)`` — the dense kernel under a band mask — but no ``L × L``
tensor is ever formed, forward or backward.

Two implementations compute it:

* **blocked** (any device; the CPU path): queries are cut into blocks of ``b``; block s
  attends to the key slice ``[s·b − w, s·b + b + w)``. K and V are padded by ``w`` at both
  ends and unfolded into all blocks' slices at once, ``(B·nblocks, H, b + 2w, D)``, and one
  fused ``scaled_dot_product_attention`` call attends every block under a
  ``(b, b + 2w)`` band mask (plus causal and key padding). Work and memory are
  ``L·(b + 2w)`` per head (``b + w`` when causal: no key lies ahead).
* **flex** (CUDA): ``torch.nn.attention.flex_attention`` compiled once, with a block mask
  that lists, for each 128-query tile, the key tiles the band reaches, and a ``mask_mod``
  for band, causal and padding inside them.

Asked for its weights (an attention map), the kernel computes the dense formula under the
band instead: the ``(B, H, L, L)`` map is quadratic anyway, and so its weights and output
come from one computation.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, ClassVar, Literal

import torch
import torch.nn.functional as F
from torch import Tensor

from selfattn.attention.functional import attention, zero_padding
from selfattn.attention.kernel import (
    AttentionKernel,
    AttentionRequest,
    Capability,
    check_kernel_inputs,
)
from selfattn.attention.masks import causal_mask, window_mask
from selfattn.kernels.base import register_kernel

__all__ = ["WindowKernel", "flex_available", "window_attention"]

Implementation = Literal["auto", "blocked", "flex"]

#: Smallest default query block: below it the per-block overhead of SDPA dominates
#: (measured at L = 16K, w = 8 … 1024: b ≈ w / 2, at least 64, is as fast as any choice).
MIN_BLOCK = 64
#: Tile size of FlexAttention's block mask (its default, and the CUDA kernels' tile).
FLEX_TILE = 128


def window_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    window: int,
    *,
    causal: bool = False,
    key_padding_mask: Tensor | None = None,
    block_size: int | None = None,
    dropout: float = 0.0,
    implementation: Implementation = "auto",
) -> Tensor:
    """Self-attention of each position to the keys within ``window`` positions of it.

    Equals ``selfattn.attention(q, k, v, window=window, causal=causal,
    key_padding_mask=key_padding_mask)[0]``; a query with no key to attend to (its whole
    neighbourhood is padding) outputs zeros, with finite gradients. Padded keys and values
    may hold anything (NaN, inf): they are zeroed before use.

    Args:
        q: queries ``(B, H, L, D)``.
        k: keys ``(B, H, L, D)`` (self-attention: as many as queries, as many heads).
        v: values ``(B, H, L, Dv)``.
        window: query i attends to keys j with |i − j| ≤ ``window``.
        causal: also only j ≤ i.
        key_padding_mask: ``(B, L)`` boolean, True at padding.
        block_size: queries per block on the blocked path (default ``max(window // 2, 64)``).
        dropout: dropout probability on the attention weights (blocked path only; pass 0.0
            in evaluation).
        implementation: ``"blocked"``, ``"flex"`` (FlexAttention; compiled on CUDA, the
            unfused forward-only reference elsewhere) or ``"auto"``: flex on CUDA when it
            is importable and no dropout is asked for, else blocked.

    Returns:
        ``(B, H, L, Dv)``.
    """
    check_kernel_inputs(q, k, v, key_padding_mask)
    _check(q, k, window, block_size, dropout, implementation)
    length = q.shape[2]
    if length == 0:
        return v.new_zeros(v.shape)
    window = min(window, length - 1)  # a wider band reaches no further key
    if key_padding_mask is not None:  # a masked weight is 0, but 0 · NaN is not
        k, v = zero_padding(k, key_padding_mask), zero_padding(v, key_padding_mask)
    if implementation == "auto":
        implementation = "flex" if q.is_cuda and flex_available() and dropout == 0 else "blocked"
    if implementation == "flex":
        out = _flex(q, k, v, window, causal, key_padding_mask)
    else:
        block = block_size or max(window // 2, MIN_BLOCK)
        out = _blocked(q, k, v, window, causal, key_padding_mask, min(block, length), dropout)
    return out


# --------------------------------------------------------------------------- blocked path


def _blocked(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    window: int,
    causal: bool,
    key_padding_mask: Tensor | None,
    block: int,
    dropout: float,
) -> Tensor:
    batch, heads, length, _ = q.shape
    num_blocks = -(-length // block)
    behind, ahead = window, 0 if causal else window  # keys before / after a query block
    span = behind + block + ahead  # keys one block of queries can reach
    tail = num_blocks * block - length  # query padding to a whole number of blocks

    def blocks_of(t: Tensor, size: int, before: int, after: int) -> Tensor:
        """``(B, H, L, X)`` → ``(B·nblocks, H, size, X)``: block s holds rows from s·b − before."""
        padded = F.pad(t, (0, 0, before, after))  # (B, H, before + L + after, X)
        slices = padded.unfold(2, size, block)  # (B, H, nblocks, X, size), a view
        return slices.permute(0, 2, 1, 4, 3).reshape(batch * num_blocks, heads, size, -1)

    q_blocks = blocks_of(q, block, 0, tail)  # (B·n, H, b, D)
    k_blocks = blocks_of(k, span, behind, tail + ahead)  # (B·n, H, b + w + ahead, D)
    v_blocks = blocks_of(v, span, behind, tail + ahead)
    allowed = _block_mask(length, window, causal, key_padding_mask, batch, block, span, q.device)
    # A query with no key (padding all around it, or past the end) would be softmax over
    # nothing = NaN: let it see its whole slice, then zero its output.
    has_key = allowed.any(dim=-1, keepdim=True)
    out = F.scaled_dot_product_attention(
        q_blocks, k_blocks, v_blocks, attn_mask=allowed | ~has_key, dropout_p=dropout
    )
    out = out.masked_fill(~has_key, 0.0)  # (B·n, H, b, Dv)
    out = out.reshape(batch, num_blocks, heads, block, -1).transpose(1, 2)
    return out.reshape(batch, heads, num_blocks * block, -1)[:, :, :length]


def _block_mask(
    length: int,
    window: int,
    causal: bool,
    key_padding_mask: Tensor | None,
    batch: int,
    block: int,
    span: int,
    device: torch.device,
) -> Tensor:
    """``(B·nblocks, 1, b, span)`` boolean: may query r of block s attend key c of its slice?

    Query r of block s sits at i = s·b + r and key c of its slice at j = s·b − w + c, so
    i − j = r + w − c: the band and causal tests are the same for every block; only which
    keys exist (inside 0..L−1, not padding) differs from block to block.
    """
    r = torch.arange(block, device=device)[:, None]
    c = torch.arange(span, device=device)[None, :]
    offset = r + window - c  # i − j
    pattern = offset.abs() <= window
    if causal:
        pattern &= offset >= 0
    num_blocks = -(-length // block)
    keep = torch.ones(batch, length, dtype=torch.bool, device=device)
    if key_padding_mask is not None:
        keep = ~key_padding_mask
    after = num_blocks * block - length + span - block - window
    keep = F.pad(keep, (window, after), value=False)  # keys outside 0..L−1 do not exist
    keep = keep.unfold(1, span, block)  # (B, nblocks, span)
    allowed = pattern & keep[:, :, None, :]  # (B, nblocks, b, span)
    return allowed.reshape(batch * num_blocks, 1, block, span)


# --------------------------------------------------------------------------- flex path


@functools.cache
def flex_available() -> bool:
    """Whether ``torch.nn.attention.flex_attention`` can be imported (PyTorch ≥ 2.5)."""
    try:
        import torch.nn.attention.flex_attention  # noqa: F401
    except ImportError:
        return False
    return True


@functools.cache
def _compiled_flex_attention() -> Callable[..., Any]:
    """``flex_attention`` compiled once per process (it is only fused when compiled)."""
    from torch.nn.attention.flex_attention import flex_attention

    return torch.compile(flex_attention)


def _flex(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    window: int,
    causal: bool,
    key_padding_mask: Tensor | None,
) -> Tensor:
    from torch.nn.attention.flex_attention import flex_attention

    block_mask = band_block_mask(q.shape[2], window, causal, key_padding_mask, q.device)
    attend: Callable[..., Any] = flex_attention  # unfused reference: forward only, L × L
    if q.is_cuda:
        attend = _compiled_flex_attention()
    out = attend(q, k, v, block_mask=block_mask)
    if key_padding_mask is None:
        return out
    has_key = _has_key(~key_padding_mask, window, causal)  # (B, L)
    return out.masked_fill(~has_key[:, None, :, None], 0.0)


def band_block_mask(
    length: int,
    window: int,
    causal: bool,
    key_padding_mask: Tensor | None,
    device: torch.device,
) -> Any:
    """FlexAttention ``BlockMask`` of the band: for each tile of 128 queries, the key tiles
    the window reaches, without forming the ``L × L`` mask ``create_block_mask`` would
    evaluate (FlexAttention's own tile tables are ``(L/128)²``, 64 KiB at L = 16K);
    inside those tiles a ``mask_mod`` tests band, causality and padding."""
    from torch.nn.attention.flex_attention import BlockMask

    pad = key_padding_mask

    def mask_mod(b: Tensor, h: Tensor, q_idx: Tensor, kv_idx: Tensor) -> Tensor:
        allowed = (q_idx - kv_idx).abs() <= window
        if causal:
            allowed = allowed & (kv_idx <= q_idx)
        if pad is not None:
            allowed = allowed & ~pad[b, kv_idx]
        return allowed

    tiles = -(-length // FLEX_TILE)
    first_query = torch.arange(tiles, device=device) * FLEX_TILE
    last_query = torch.clamp(first_query + FLEX_TILE - 1, max=length - 1)
    first_tile = torch.clamp(first_query - window, min=0) // FLEX_TILE
    reach = last_query if causal else torch.clamp(last_query + window, max=length - 1)
    last_tile = reach // FLEX_TILE
    num_tiles = (last_tile - first_tile + 1).to(torch.int32)
    # Row m lists tiles first..last, then repeats the last one (entries past the count are
    # never read, but must be valid tile indices).
    steps = torch.arange(tiles, device=device)[None, :]
    indices = torch.minimum(first_tile[:, None] + steps, last_tile[:, None]).to(torch.int32)
    return BlockMask.from_kv_blocks(
        num_tiles[None, None],
        indices[None, None],
        BLOCK_SIZE=FLEX_TILE,
        mask_mod=mask_mod,
        seq_lengths=(length, length),
    )


def _has_key(keep: Tensor, window: int, causal: bool) -> Tensor:
    """``(B, L)``: whether query i has any key that is not padding within its window, from
    prefix sums of ``keep (B, L)`` (O(L), whatever the window)."""
    length = keep.shape[1]
    counts = F.pad(keep.long().cumsum(1), (1, 0))  # counts[:, n] = keys kept among 0..n−1
    i = torch.arange(length, device=keep.device)
    start = torch.clamp(i - window, min=0)
    stop = i + 1 if causal else torch.clamp(i + window + 1, max=length)
    return (counts[:, stop] - counts[:, start]) > 0


# --------------------------------------------------------------------------- the kernel


@register_kernel
class WindowKernel(AttentionKernel):
    """Truncated self-attention: query i sees keys with |i − j| ≤ ``window`` (lecture 000,
    §Truncated self-attention), exactly, in time and memory that grow as L·w.

    Args:
        window: the half-width w of the band (0: each position attends to itself only).
        block_size: queries per block on the blocked (CPU) path; default ``max(w // 2, 64)``.
        dropout: dropout probability on the attention weights, in training only.
    """

    name = "window"
    exact = True
    size_option = "window"
    supports_causal = True
    supports_window = True  # a call's window narrows the kernel's: the band is the smaller
    supports_weights = True
    supports_cross = False
    reasons: ClassVar[dict[Capability, str]] = {
        "mask": "it attends within its band block by block, with no (T, S) scores to mask; "
        "use the dense kernel with window=…",
        "scores": "its blocks are fused scaled-dot softmax; use the dense kernel with window=…",
        "cache": "its blocks pair query i with key i: queries and keys are one sequence",
        "cross": "its blocks pair query i with key i: queries and keys are one sequence",
    }

    def __init__(self, window: int, block_size: int | None = None, dropout: float = 0.0) -> None:
        super().__init__()
        _check_options(window, block_size, dropout)
        self.window = window
        self.block_size = block_size
        self.dropout = dropout

    def extra_repr(self) -> str:
        return f"window={self.window}, block_size={self.block_size}, dropout={self.dropout}"

    def attend(
        self, q: Tensor, k: Tensor, v: Tensor, request: AttentionRequest
    ) -> tuple[Tensor, Tensor | None]:
        window = self.window if request.window is None else min(self.window, request.window)
        dropout = self.dropout if self.training else 0.0
        if request.need_weights:  # an (L, L) map is asked for: the dense formula gives both
            return attention(
                q,
                k,
                v,
                key_padding_mask=request.key_padding_mask,
                causal=request.causal,
                window=window,
                need_weights=True,
                dropout=dropout,
            )
        out = window_attention(
            q,
            k,
            v,
            window,
            causal=request.causal,
            key_padding_mask=request.key_padding_mask,
            block_size=self.block_size,
            dropout=dropout,
        )
        return out, None

    def reference_mask(
        self, num_queries: int, num_keys: int, device: torch.device, *, causal: bool = False
    ) -> Tensor:
        """``(T, S)`` boolean band |i − j| ≤ w (and j ≤ i when ``causal``): dense softmax
        attention under it equals this kernel."""
        allowed = window_mask(num_queries, num_keys, self.window, device)
        if causal:
            allowed &= causal_mask(num_queries, num_keys, device)
        return allowed


# --------------------------------------------------------------------------- validation


def _check(
    q: Tensor,
    k: Tensor,
    window: int,
    block_size: int | None,
    dropout: float,
    implementation: str,
) -> None:
    if q.shape[2] != k.shape[2]:
        raise ValueError(
            f"window attention is self-attention: q and k lengths differ "
            f"(T={q.shape[2]}, S={k.shape[2]})"
        )
    if q.shape[1] != k.shape[1]:
        raise ValueError(
            f"window attention needs as many key/value heads as query heads, got "
            f"{k.shape[1]} and {q.shape[1]}"
        )
    _check_options(window, block_size, dropout)
    if implementation not in ("auto", "blocked", "flex"):
        raise ValueError(
            f"implementation must be 'auto', 'blocked' or 'flex', got {implementation!r}"
        )
    if implementation == "flex" and not flex_available():
        raise RuntimeError("implementation='flex' needs torch.nn.attention.flex_attention")
    if implementation == "flex" and dropout > 0:
        raise ValueError("implementation='flex' has no attention dropout; use 'blocked'")


def _check_options(window: int, block_size: int | None, dropout: float) -> None:
    """One-line errors for a window, block size or dropout that window attention (the
    function and the kernel alike) cannot use."""
    if not isinstance(window, int) or window < 0:
        raise ValueError(f"window must be a non-negative int, got {window!r}")
    if block_size is not None and block_size < 1:
        raise ValueError(f"block_size must be >= 1, got {block_size}")
    if not 0.0 <= dropout < 1.0:
        raise ValueError(f"dropout must be in [0, 1), got {dropout}")
