"""Edge-list graph attention is dense attention under the adjacency mask, at the cost of
the edges."""

from __future__ import annotations

import math

import pytest
import torch

from selfattn.attention import adjacency_mask, attention
from selfattn.bench.memory import measure_memory
from selfattn.kernels.graph import (
    dense_to_edge_index,
    edge_attention,
    edge_attention_weights,
    edge_weights_to_dense,
)

F64 = torch.float64
H, D = 3, 5


def _nodes(num_nodes: int, dtype: torch.dtype = F64) -> tuple[torch.Tensor, ...]:
    return tuple(torch.randn(num_nodes, H, D, dtype=dtype, requires_grad=True) for _ in range(3))


def _dense(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """``selfattn.attention`` on node tensors ``(N, H, D)`` as one sequence of N."""
    batched = (t.transpose(0, 1)[None] for t in (q, k, v))
    out, _ = attention(*batched, mask=mask)
    return out[0].transpose(0, 1)


def _random_graph(num_nodes: int, p: float = 0.3) -> torch.Tensor:
    """``(2, E)`` edges of a random directed graph with a few self-loops, node 3 with no
    incoming edge and node 4 with no edge at all."""
    adjacency = torch.rand(num_nodes, num_nodes) < p  # [i, j]: j → i
    adjacency.fill_diagonal_(False)
    adjacency[[0, 5, 7], [0, 5, 7]] = True
    adjacency[3] = False
    adjacency[4] = False
    adjacency[:, 4] = False
    target, source = adjacency.nonzero(as_tuple=True)
    return torch.stack([source, target])


def _assert_same_with_grads(
    out: torch.Tensor, expected: torch.Tensor, inputs: tuple[torch.Tensor, ...]
) -> None:
    torch.testing.assert_close(out, expected, rtol=0, atol=1e-10)
    grad_out = torch.randn_like(out)
    ours = torch.autograd.grad(out, inputs, grad_out)
    theirs = torch.autograd.grad(expected, inputs, grad_out)
    for a, b in zip(ours, theirs, strict=True):
        assert torch.isfinite(a).all()
        torch.testing.assert_close(a, b, rtol=0, atol=1e-10)


def test_equals_dense_attention_under_the_adjacency_mask() -> None:
    num_nodes = 15
    edge_index = _random_graph(num_nodes)
    q, k, v = _nodes(num_nodes)
    out = edge_attention(q, k, v, edge_index)
    mask = adjacency_mask(edge_index, num_nodes, self_loops=False)
    _assert_same_with_grads(out, _dense(q, k, v, mask), (q, k, v))
    assert torch.equal(out[3], torch.zeros_like(out[3]))  # no incoming edge: zeros


def test_edge_weights_are_the_dense_weights_on_the_graphs_own_edges() -> None:
    """The node × node map: the dense weights under the adjacency mask, zero off the
    edges, and ``map[h] @ v[:, h]`` is each head's output."""
    num_nodes = 15
    edge_index = _random_graph(num_nodes)
    q, k, v = (t.detach() for t in _nodes(num_nodes))
    bias = torch.randn(edge_index.shape[1], H, dtype=F64)
    weights = edge_attention_weights(q, k, edge_index, edge_bias=bias)
    assert weights.shape == (edge_index.shape[1], H)
    dense = edge_weights_to_dense(weights, edge_index, num_nodes)  # (H, N, N)
    out = edge_attention(q, k, v, edge_index, edge_bias=bias)
    torch.testing.assert_close(torch.einsum("hij,jhd->ihd", dense, v), out, rtol=0, atol=1e-12)
    mask = adjacency_mask(edge_index, num_nodes, self_loops=False)
    assert torch.all(dense[:, ~mask] == 0)
    additive = torch.full((H, num_nodes, num_nodes), -math.inf, dtype=F64)
    additive[:, edge_index[1], edge_index[0]] = bias.T
    batched = (t.transpose(0, 1)[None] for t in (q, k, v))
    _, expected = attention(*batched, mask=additive[None], need_weights=True)
    assert expected is not None
    torch.testing.assert_close(dense, expected[0], rtol=0, atol=1e-12)
    row_sums = dense.sum(-1)  # 1 for a node with incoming edges, 0 for nodes 3 and 4
    torch.testing.assert_close(row_sums, mask.any(dim=1).to(F64).expand(H, -1))


def test_edge_bias_is_an_additive_mask() -> None:
    num_nodes = 12
    edge_index = _random_graph(num_nodes)
    source, target = edge_index
    q, k, v = _nodes(num_nodes)
    bias = torch.randn(edge_index.shape[1], H, dtype=F64, requires_grad=True)
    bias_removed = bias.detach().clone()
    bias_removed[target == 0] = -math.inf  # node 0 loses every incoming edge
    additive = torch.full((H, num_nodes, num_nodes), -math.inf, dtype=F64)
    heads = torch.arange(H)[None, :]
    additive = additive.index_put((heads, target[:, None], source[:, None]), bias)
    out = edge_attention(q, k, v, edge_index, edge_bias=bias)
    _assert_same_with_grads(out, _dense(q, k, v, additive[None]), (q, k, v, bias))
    removed = edge_attention(q, k, v, edge_index, edge_bias=bias_removed)
    assert torch.equal(removed[0], torch.zeros_like(removed[0]))
    removed.sum().backward()
    assert q.grad is not None and torch.isfinite(q.grad).all()


def test_scale() -> None:
    edge_index = _random_graph(10)
    q, k, v = (t.detach() for t in _nodes(10))
    torch.testing.assert_close(
        edge_attention(q, k, v, edge_index, scale=0.5),
        edge_attention(q * 0.5 * math.sqrt(D), k, v, edge_index),
    )


def test_bipartite_queries_and_keys() -> None:
    """Targets and sources may be different node sets (cross-attention on a graph)."""
    q = torch.randn(4, H, D, dtype=F64)
    k, v = torch.randn(6, H, D, dtype=F64), torch.randn(6, H, 2, dtype=F64)
    edge_index = torch.tensor([[0, 5, 2, 3, 5], [0, 0, 1, 3, 3]])
    mask = torch.zeros(4, 6, dtype=torch.bool)
    mask[edge_index[1], edge_index[0]] = True
    torch.testing.assert_close(
        edge_attention(q, k, v, edge_index), _dense(q, k, v, mask), rtol=0, atol=1e-12
    )


def test_batch_of_padded_graphs_through_dense_to_edge_index() -> None:
    batch, length = 3, 7
    adjacency = torch.rand(batch, length, length) < 0.4
    adjacency[0, 2] = False  # a query with no key
    pad = torch.zeros(batch, length, dtype=torch.bool)
    pad[1, 5:] = True
    pad[2, 3:] = True
    q, k, v = (torch.randn(batch, H, length, D, dtype=F64, requires_grad=True) for _ in range(3))
    expected, _ = attention(q, k, v, mask=adjacency[:, None], key_padding_mask=pad)

    edge_index, node_index = dense_to_edge_index(adjacency, pad)
    assert node_index.tolist() == [*range(12), 14, 15, 16]
    q_n, k_n, v_n = (
        t.transpose(1, 2).reshape(batch * length, H, -1)[node_index] for t in (q, k, v)
    )
    out = edge_attention(q_n, k_n, v_n, edge_index)
    scattered = out.new_zeros(batch * length, H, D).index_copy(0, node_index, out)
    scattered = scattered.reshape(batch, length, H, D).transpose(1, 2)
    # Padded queries' outputs are not defined by the graph: compare the real ones, and
    # the gradients of a loss that ignores padding.
    real = ~pad[:, None, :, None]
    _assert_same_with_grads(scattered * real, expected * real, (q, k, v))


def test_dense_to_edge_index_reads_rows_as_targets() -> None:
    adjacency = torch.zeros(2, 3, 3, dtype=torch.bool)
    adjacency[0, 1, 2] = True  # node 1 attends to node 2: edge 2 → 1
    adjacency[1, 0, 0] = True
    adjacency[1, 2, 1] = True
    edge_index, node_index = dense_to_edge_index(adjacency)
    assert edge_index.tolist() == [[2, 3, 4], [1, 3, 5]]
    assert node_index.tolist() == list(range(6))
    pad = torch.tensor([[False, False, False], [False, True, False]])
    edge_index, node_index = dense_to_edge_index(adjacency, pad)
    assert edge_index.tolist() == [[2, 3], [1, 3]]  # the edge from padding is gone
    assert node_index.tolist() == [0, 1, 2, 3, 5]


def test_no_dependence_on_non_neighbours() -> None:
    num_nodes = 15
    edge_index = _random_graph(num_nodes)
    q, k, v = (t.detach() for t in _nodes(num_nodes))
    out = edge_attention(q, k, v, edge_index)
    node = int(edge_index[1, 0])
    neighbours = edge_index[0, edge_index[1] == node]
    others = torch.ones(num_nodes, dtype=torch.bool)
    others[neighbours] = False
    k2, v2 = k.clone(), v.clone()
    k2[others] += torch.randn_like(k2[others])
    v2[others] += torch.randn_like(v2[others])
    changed = edge_attention(q, k2, v2, edge_index)
    torch.testing.assert_close(changed[node], out[node], rtol=0, atol=1e-13)
    assert not torch.allclose(changed, out)


def test_memory_grows_with_edges_not_nodes_squared() -> None:
    """20 000 nodes with 4 (then 2) incoming edges each: forward+backward allocates a few
    (E, H, D) tensors, in proportion to E, and nothing of size N²."""
    num_nodes, heads, head_dim = 20000, 2, 16
    q, k, v = (torch.randn(num_nodes, heads, head_dim, requires_grad=True) for _ in range(3))
    peaks = {}
    for degree in (4, 2):
        source = torch.randint(num_nodes, (num_nodes * degree,))
        target = torch.arange(num_nodes).repeat_interleave(degree)
        edge_index = torch.stack([source, target])
        report = measure_memory(lambda e=edge_index: edge_attention(q, k, v, e).sum().backward())
        messages = edge_index.shape[1] * heads * head_dim * 4  # bytes of one (E, H, D)
        assert report.largest <= messages < num_nodes * num_nodes * 4 / 100
        assert report.peak < 8 * messages, f"peak {report.peak} B"
        peaks[degree] = report.peak
    assert 1.5 < peaks[4] / peaks[2] < 2.5
    assert q.grad is not None and torch.isfinite(q.grad).all()


def test_errors() -> None:
    q = torch.randn(5, H, D)
    edges = torch.tensor([[0, 1], [1, 2]])
    with pytest.raises(ValueError, match=r"q must have shape \(N, H, D\)"):
        edge_attention(q[None], q, q, edges)
    with pytest.raises(TypeError, match="share a dtype"):
        edge_attention(q, q.double(), q, edges)
    with pytest.raises(ValueError, match="agree in heads and head dim"):
        edge_attention(q, torch.randn(5, H, D + 1), q, edges)
    with pytest.raises(ValueError, match=r"edge_index must have shape \(2, E\)"):
        edge_attention(q, q, q, edges[0])
    with pytest.raises(TypeError, match=r"edge_index must be torch\.long"):
        edge_attention(q, q, q, edges.int())
    with pytest.raises(ValueError, match=r"sources refer to nodes outside 0\.\.4"):
        edge_attention(q, q, q, torch.tensor([[5], [0]]))
    with pytest.raises(ValueError, match=r"targets refer to nodes outside 0\.\.4"):
        edge_attention(q, q, q, torch.tensor([[0], [7]]))
    with pytest.raises(ValueError, match="negative node numbers"):
        edge_attention(q, q, q, torch.tensor([[-1], [0]]))
    with pytest.raises(ValueError, match=r"edge_bias must have shape \(E, H\)"):
        edge_attention(q, q, q, edges, edge_bias=torch.randn(2, H + 1))
    with pytest.raises(ValueError, match=r"adjacency must have shape \(B, L, L\)"):
        dense_to_edge_index(torch.ones(3, 3, dtype=torch.bool))
    with pytest.raises(TypeError, match="adjacency must be bool"):
        dense_to_edge_index(torch.ones(1, 3, 3))
    with pytest.raises(ValueError, match=r"key_padding_mask must have shape \(B, L\)"):
        dense_to_edge_index(torch.ones(1, 3, 3, dtype=torch.bool), torch.zeros(1, 4).bool())
