"""Masks: which key j each query i may attend to (lecture 000: padding, truncated, graph).

Convention throughout selfattn, the same as ``F.scaled_dot_product_attention``: a boolean
mask is **True where attention is allowed**. The one exception is ``key_padding_mask``,
which follows ``torch.nn.MultiheadAttention``: **True marks padding** to be ignored.

Query i of a block of T queries over S keys sits at absolute position ``S - T + i``
(bottom-right alignment) unless a ``query_offset`` says otherwise, so causal and window
masks stay right during incremental decoding, when only the newest queries are computed.
"""

from __future__ import annotations

from typing import TypedDict

import torch
from torch import Tensor


class MaskArgs(TypedDict, total=False):
    """Which keys each query may see: the keyword arguments that blocks and stacks hand
    on to :class:`~selfattn.attention.MultiHeadAttention` as they are.

    Attributes:
        key_padding_mask: ``(B, S)`` boolean, True at padding; default none.
        mask: boolean (True = may attend) or additive float mask broadcastable to
            ``(B, H, T, S)``, e.g. a graph's :func:`adjacency_mask`; the same in every
            block of a stack; default none.
        causal: each position sees only itself and earlier ones (a Conformer's
            convolutions too: streaming); default False.
        window: truncated dense attention to |i − j| ≤ ``window`` (with an attention
            kernel, put the window in the ``"window"`` kernel instead); default none.
    """

    key_padding_mask: Tensor | None
    mask: Tensor | None
    causal: bool
    window: int | None


def _grid(
    num_queries: int, num_keys: int, device: torch.device | None, query_offset: int | None
) -> tuple[Tensor, Tensor]:
    """Absolute query positions ``(T, 1)`` and key positions ``(1, S)``."""
    first = num_keys - num_queries if query_offset is None else query_offset
    i = torch.arange(first, first + num_queries, device=device)[:, None]
    j = torch.arange(num_keys, device=device)[None, :]
    return i, j


def causal_mask(
    num_queries: int,
    num_keys: int,
    device: torch.device | None = None,
    query_offset: int | None = None,
) -> Tensor:
    """``(T, S)`` boolean: query i may see key j only if j ≤ i (no peeking at the future)."""
    i, j = _grid(num_queries, num_keys, device, query_offset)
    return j <= i


def window_mask(
    num_queries: int,
    num_keys: int,
    window: int,
    device: torch.device | None = None,
    query_offset: int | None = None,
) -> Tensor:
    """``(T, S)`` boolean: truncated self-attention, |i − j| ≤ ``window``."""
    if window < 0:
        raise ValueError(f"window must be >= 0, got {window}")
    i, j = _grid(num_queries, num_keys, device, query_offset)
    return (i - j).abs() <= window


def padding_mask(lengths: Tensor, max_len: int | None = None) -> Tensor:
    """``(B, S)`` key-padding mask from sequence lengths: True at padded positions."""
    if lengths.dim() != 1:
        raise ValueError(f"lengths must be 1-D (B,), got shape {tuple(lengths.shape)}")
    max_len = int(lengths.max()) if max_len is None else max_len
    return torch.arange(max_len, device=lengths.device)[None, :] >= lengths[:, None]


def adjacency_mask(
    edge_index: Tensor, num_nodes: int, *, self_loops: bool = True, undirected: bool = False
) -> Tensor:
    """``(N, N)`` boolean mask from an edge list: node i attends to node j iff j → i is an edge.

    Args:
        edge_index: ``(2, E)`` long tensor of (source, target) pairs.
        num_nodes: N.
        self_loops: also let every node attend to itself (the usual GNN choice).
        undirected: add every edge in both directions.
    """
    if edge_index.dim() != 2 or edge_index.shape[0] != 2:
        raise ValueError(f"edge_index must have shape (2, E), got {tuple(edge_index.shape)}")
    if edge_index.numel() and (edge_index.min() < 0 or edge_index.max() >= num_nodes):
        raise ValueError(f"edge_index refers to nodes outside 0..{num_nodes - 1}")
    adj = torch.zeros(num_nodes, num_nodes, dtype=torch.bool, device=edge_index.device)
    src, dst = edge_index
    adj[dst, src] = True
    if undirected:
        adj[src, dst] = True
    if self_loops:
        adj.fill_diagonal_(True)
    return adj


def structural_mask(
    num_queries: int,
    num_keys: int,
    *,
    causal: bool = False,
    window: int | None = None,
    include_self: bool = True,
    device: torch.device | None = None,
    query_offset: int | None = None,
) -> Tensor | None:
    """The ``(T, S)`` mask implied by the causal / window / include-self options, or None.

    ``query_offset`` is the absolute position of the first query (default ``S - T``); a
    chunk of queries passes its own offset so the mask can be built one chunk at a time.
    """
    allowed: Tensor | None = None
    parts = []
    if causal:
        parts.append(causal_mask(num_queries, num_keys, device, query_offset))
    if window is not None:
        parts.append(window_mask(num_queries, num_keys, window, device, query_offset))
    if not include_self:  # no position attends to itself
        i, j = _grid(num_queries, num_keys, device, query_offset)
        parts.append(i != j)
    for part in parts:
        allowed = part if allowed is None else allowed & part
    return allowed
