"""One-line refusals of malformed attention inputs.

The attention formula (:func:`selfattn.attention.attention`), the kernel interface
(:func:`~selfattn.attention.kernel.check_kernel_inputs`) and the graph kernel's dense
form (:func:`selfattn.kernels.graph.dense_to_edge_index`) take the same queries, keys,
values and key padding masks, so they refuse a malformed one with the same words.
"""

from __future__ import annotations

import torch
from torch import Tensor


def shape_text(t: Tensor) -> str:
    """``t``'s shape as an error message writes it: ``(2, 4, 8, 16)``."""
    return "(" + ", ".join(str(s) for s in t.shape) + ")"


def check_qkv(q: Tensor, k: Tensor, v: Tensor) -> None:
    """Refuse ``q``, ``k``, ``v`` that are not ``(B, H, L, D)`` floating-point tensors of
    one dtype."""
    for name, t in (("q", q), ("k", k), ("v", v)):
        if t.dim() != 4:
            raise ValueError(f"{name} must have shape (B, H, L, D), got {shape_text(t)}")
        if not t.is_floating_point():
            raise TypeError(f"{name} must be a floating-point tensor, got {t.dtype}")
    if not (q.dtype == k.dtype == v.dtype):
        raise TypeError(f"q, k, v must share a dtype, got {q.dtype}, {k.dtype}, {v.dtype}")


def check_key_padding_mask(
    key_padding_mask: Tensor | None, batch: int, length: int, *, axis: str = "S"
) -> None:
    """Refuse a key padding mask that is not boolean ``(batch, length)``; ``axis`` names
    its second dimension in the message (``S``: keys; ``L``: the nodes of a graph)."""
    if key_padding_mask is None:
        return
    if key_padding_mask.dtype != torch.bool:
        raise TypeError(
            f"key_padding_mask must be bool (True = padding), got {key_padding_mask.dtype}"
        )
    if tuple(key_padding_mask.shape) != (batch, length):
        raise ValueError(
            f"key_padding_mask must have shape (B, {axis}) = ({batch}, {length}), "
            f"got {shape_text(key_padding_mask)}"
        )


def check_attention_inputs(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    mask: Tensor | None,
    key_padding_mask: Tensor | None,
    window: int | None,
    dropout: float,
    chunk_size: int | None,
) -> None:
    """Refuse malformed arguments of :func:`selfattn.attention.attention` in one line."""
    check_qkv(q, k, v)
    batch, heads, num_queries, head_dim = q.shape
    if k.shape[0] != batch or v.shape[0] != batch:
        raise ValueError(
            f"batch sizes differ: q {shape_text(q)}, k {shape_text(k)}, v {shape_text(v)}"
        )
    if k.shape[1] != v.shape[1] or k.shape[2] != v.shape[2]:
        raise ValueError(
            f"k and v must agree in heads and length: k {shape_text(k)}, v {shape_text(v)}"
        )
    if k.shape[-1] != head_dim:
        raise ValueError(f"q and k head dims differ: q {shape_text(q)}, k {shape_text(k)}")
    if heads % k.shape[1]:
        raise ValueError(
            f"query heads ({heads}) must be a multiple of key/value heads ({k.shape[1]})"
        )
    num_keys = k.shape[2]
    check_key_padding_mask(key_padding_mask, batch, num_keys)
    if mask is not None:
        if mask.dtype != torch.bool and mask.dtype != q.dtype:
            raise TypeError(f"mask must be bool or {q.dtype} (additive), got {mask.dtype}")
        full = (batch, heads, num_queries, num_keys)
        ok = mask.dim() <= 4 and all(
            m in (1, f) for m, f in zip(reversed(mask.shape), reversed(full), strict=False)
        )
        if not ok:
            raise ValueError(
                f"mask of shape {shape_text(mask)} does not broadcast to (B, H, T, S) = {full}"
            )
    if window is not None and (not isinstance(window, int) or window < 0):
        raise ValueError(f"window must be a non-negative int, got {window!r}")
    if not 0.0 <= dropout < 1.0:
        raise ValueError(f"dropout must be in [0, 1), got {dropout}")
    if chunk_size is not None and chunk_size < 1:
        raise ValueError(f"chunk_size must be >= 1, got {chunk_size}")
