"""Graph attention along an edge list, in time and memory that grow with the edges.

Lecture 000 (§Self-attention for graph): on a graph, a node attends only to the nodes it
is connected to — the attention matrix is the adjacency pattern, and the edges say which
entries to compute. Computing only those entries turns self-attention into a graph neural
network (Graph Attention Networks, Veličković et al. 2018; the dot-product form of the
Graph Transformer, Dwivedi & Bresson 2021).

:func:`edge_attention` takes the graph as an edge list, PyTorch Geometric's convention:
``edge_index[0]`` is the source j (the key/value node), ``edge_index[1]`` the target i (the
query node), and i attends to j. For each edge it computes the score
``scale · q_i · k_j (+ bias_ij)``; a softmax over each target's incoming edges (a *scatter
softmax*) gives the weights, and the target's output is ``Σ_j α_ij v_j``. Cost: O(E·H·D)
time; memory O(E·H) for the scores and weights plus the gathered per-edge keys and values,
O(E·H·D) — what a message-passing GNN holds for its messages — and never an ``N × N``
matrix.

:func:`edge_attention_weights` gives the weights themselves, one per edge and head, and
:func:`edge_weights_to_dense` lays them out as a node × node attention map (zero off the
edges), the map of the graph's own edges.

:func:`dense_to_edge_index` turns the padded, dense form used by
:func:`selfattn.attention.attention` (a ``(B, L, L)`` adjacency mask and a key padding mask)
into an edge list over the batch's real nodes, one disjoint graph per sequence.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from selfattn.attention.checks import check_key_padding_mask

__all__ = [
    "dense_to_edge_index",
    "edge_attention",
    "edge_attention_weights",
    "edge_weights_to_dense",
    "scatter_softmax",
]


def edge_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    edge_index: Tensor,
    *,
    edge_bias: Tensor | None = None,
    scale: float | None = None,
) -> Tensor:
    """Softmax attention of each node over its incoming edges.

    Args:
        q: queries of the target nodes ``(N, H, D)`` (N nodes of one graph, or of a batch
            of graphs numbered one after the other).
        k: keys of the source nodes ``(Ns, H, D)``; usually the same N nodes.
        v: values of the source nodes ``(Ns, H, Dv)``.
        edge_index: ``(2, E)`` long: column e is the edge ``edge_index[0, e] = j →
            edge_index[1, e] = i``; target i attends to source j (PyTorch Geometric's
            convention; :func:`selfattn.attention.adjacency_mask` reads it the same way).
            A repeated edge counts as many times as it appears.
        edge_bias: ``(E, H)`` term added to each edge's score (edge features, relative
            positions); ``-inf`` removes an edge.
        scale: factor on ``q_i · k_j`` (default 1/√D).

    Returns:
        ``(N, H, Dv)``; a node with no incoming edge gets zeros.
    """
    _check(q, k, v, edge_index, edge_bias)
    source, target = edge_index[0], edge_index[1]
    weights = _edge_weights(q, k, edge_index, edge_bias, scale)  # (E, H)
    messages = weights[:, :, None] * v.index_select(0, source)  # (E, H, Dv)
    out = torch.zeros(q.shape[0], *v.shape[1:], dtype=v.dtype, device=v.device)
    return out.index_add(0, target, messages)


def edge_attention_weights(
    q: Tensor,
    k: Tensor,
    edge_index: Tensor,
    *,
    edge_bias: Tensor | None = None,
    scale: float | None = None,
) -> Tensor:
    """The weights :func:`edge_attention` gives each edge: softmax of the edge scores over
    each target's incoming edges.

    Args:
        q: ``(N, H, D)``; k: ``(Ns, H, D)``; edge_index, edge_bias, scale: as for
            :func:`edge_attention`.

    Returns:
        ``(E, H)``; a target's incoming weights sum to 1 (per head).
    """
    _check(q, k, None, edge_index, edge_bias)
    return _edge_weights(q, k, edge_index, edge_bias, scale)


def edge_weights_to_dense(
    weights: Tensor, edge_index: Tensor, num_targets: int, num_sources: int | None = None
) -> Tensor:
    """Edge weights ``(E, H)`` as a node × node attention map ``(H, N, Ns)``: row i holds
    target i's weights over its sources, 0 off the edges (a repeated edge adds up), so
    ``map[h] @ v[:, h]`` is :func:`edge_attention`'s output of head h."""
    num_sources = num_targets if num_sources is None else num_sources
    heads = weights.shape[1]
    source, target = edge_index[0], edge_index[1]
    cell = target * num_sources + source  # (E,): the flat (i, j) entry of each edge
    dense = weights.new_zeros(num_targets * num_sources, heads).index_add(0, cell, weights)
    return dense.T.reshape(heads, num_targets, num_sources)


def _edge_weights(
    q: Tensor, k: Tensor, edge_index: Tensor, edge_bias: Tensor | None, scale: float | None
) -> Tensor:
    source, target = edge_index[0], edge_index[1]
    if scale is None:
        scale = 1.0 / math.sqrt(q.shape[-1])
    # index_select rather than q[target]: its backward is an index_add, where advanced
    # indexing's is a slower accumulating index_put.
    scores = (q.index_select(0, target) * k.index_select(0, source)).sum(dim=-1) * scale
    if edge_bias is not None:
        scores = scores + edge_bias
    return scatter_softmax(scores, target, q.shape[0])  # (E, H)


def scatter_softmax(scores: Tensor, group: Tensor, num_groups: int) -> Tensor:
    """Softmax of ``scores (E, H)`` over the entries of each group (each target node).

    ``group (E,)`` holds each entry's group in ``0 .. num_groups − 1``. The per-group
    maximum is subtracted first for stability; a group whose scores are all ``-inf`` gets
    zero weights (as a fully masked row of :func:`selfattn.attention.attention` does).
    """
    index = group[:, None].expand_as(scores)
    peak = torch.full(
        (num_groups, scores.shape[1]), -math.inf, dtype=scores.dtype, device=scores.device
    )
    # The shift cancels in the softmax, so no gradient needs to flow through it.
    peak = peak.scatter_reduce(0, index, scores.detach(), "amax", include_self=False)
    peak = peak.masked_fill(torch.isneginf(peak), 0.0)  # groups with nothing finite
    exp = torch.exp(scores - peak.index_select(0, group))
    total = torch.zeros_like(peak).index_add(0, group, exp)
    # total ≥ 1 wherever a group has a finite score (its maximum contributes exp(0));
    # elsewhere exp is 0 too and the clamp keeps 0 / 0 out.
    return exp / total.clamp_min(torch.finfo(total.dtype).tiny).index_select(0, group)


def dense_to_edge_index(
    adjacency: Tensor, key_padding_mask: Tensor | None = None
) -> tuple[Tensor, Tensor]:
    """Edge list of a padded batch of graphs given as dense masks.

    The real (non-padding) nodes of all B graphs are numbered one after the other,
    ``0 .. N − 1``, in the order of the flattened ``(B·L)`` layout, so the graphs become
    one graph with B disjoint parts (N = B·L without padding).

    Args:
        adjacency: ``(B, L, L)`` boolean, ``adjacency[b, i, j]`` True where node i may
            attend to node j (the ``mask`` convention of :func:`selfattn.attention`).
        key_padding_mask: ``(B, L)`` boolean, True at padding; edges to or from padding
            are dropped.

    Returns:
        ``(edge_index, node_index)``: ``edge_index (2, E)`` with rows (source j, target i)
        over the N real nodes, grouped by target; ``node_index (N,)`` the flat position
        ``b·L + i`` of each, so ``x.reshape(B * L, ...)[node_index]`` gathers node features
        and ``out.new_zeros(B * L, ...).index_copy(0, node_index, y)`` scatters back.
    """
    if adjacency.dim() != 3 or adjacency.shape[1] != adjacency.shape[2]:
        raise ValueError(f"adjacency must have shape (B, L, L), got {tuple(adjacency.shape)}")
    if adjacency.dtype != torch.bool:
        raise TypeError(f"adjacency must be bool (True = may attend), got {adjacency.dtype}")
    batch, length, _ = adjacency.shape
    check_key_padding_mask(key_padding_mask, batch, length, axis="L")
    keep = torch.ones(batch, length, dtype=torch.bool, device=adjacency.device)
    if key_padding_mask is not None:
        keep = ~key_padding_mask
    node_index = keep.reshape(-1).nonzero().squeeze(1)  # (N,)
    renumber = torch.full((batch * length,), -1, dtype=torch.long, device=adjacency.device)
    renumber[node_index] = torch.arange(node_index.numel(), device=adjacency.device)
    b, i, j = (adjacency & keep[:, :, None] & keep[:, None, :]).nonzero(as_tuple=True)
    edge_index = torch.stack([renumber[b * length + j], renumber[b * length + i]])
    return edge_index, node_index


def _check(
    q: Tensor, k: Tensor, v: Tensor | None, edge_index: Tensor, edge_bias: Tensor | None
) -> None:
    v = k if v is None else v  # weights only: there are no values to check
    for label, t in (("q", q), ("k", k), ("v", v)):
        if t.dim() != 3:
            raise ValueError(f"{label} must have shape (N, H, D), got {tuple(t.shape)}")
        if not t.is_floating_point():
            raise TypeError(f"{label} must be a floating-point tensor, got {t.dtype}")
    if not q.dtype == k.dtype == v.dtype:
        raise TypeError(f"q, k, v must share a dtype, got {q.dtype}, {k.dtype}, {v.dtype}")
    if q.shape[1:] != k.shape[1:] or k.shape[:2] != v.shape[:2]:
        raise ValueError(
            f"q and k must agree in heads and head dim, k and v in nodes and heads: "
            f"q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)}"
        )
    if edge_index.dim() != 2 or edge_index.shape[0] != 2:
        raise ValueError(f"edge_index must have shape (2, E), got {tuple(edge_index.shape)}")
    if edge_index.dtype != torch.long:
        raise TypeError(f"edge_index must be torch.long, got {edge_index.dtype}")
    if edge_index.numel():
        if edge_index.min() < 0:
            raise ValueError("edge_index holds negative node numbers")
        if edge_index[0].max() >= k.shape[0]:
            raise ValueError(f"edge_index sources refer to nodes outside 0..{k.shape[0] - 1}")
        if edge_index[1].max() >= q.shape[0]:
            raise ValueError(f"edge_index targets refer to nodes outside 0..{q.shape[0] - 1}")
    if edge_bias is not None:
        expected = (edge_index.shape[1], q.shape[1])
        if tuple(edge_bias.shape) != expected:
            raise ValueError(
                f"edge_bias must have shape (E, H) = {expected}, got {tuple(edge_bias.shape)}"
            )
        if edge_bias.dtype != q.dtype:
            raise TypeError(f"edge_bias must have dtype {q.dtype}, got {edge_bias.dtype}")
