"""Graph attention maps: node × node, zero off the graph's edges, the weights the model
uses; ``include_self`` and ``share_weights`` reach the graph encoder."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from selfattn.data import Collator, Example, LabelVocabulary
from selfattn.datatypes import Batch
from selfattn.kernels import edge_attention
from selfattn.models.composed import TaskModel
from selfattn.models.graph import GraphAttention
from selfattn.models.registry import model_options

from ..helpers_models import build

FEATURES, EDGE_DIM, HEADS = 5, 3, 2
LABELS = LabelVocabulary(["a", "b"])
# Two graphs: a path 0 – 1 – 2 – 3 – 4 and a triangle 0 – 1 – 2 with a pendant 3.
EDGES = {
    5: [(0, 1), (1, 2), (2, 3), (3, 4)],
    4: [(0, 1), (1, 2), (2, 0), (2, 3)],
}


def _model(num_layers: int = 2, **options: object) -> TaskModel:
    config = model_options(
        architecture="graph",
        embed_dim=16,
        num_heads=HEADS,
        num_layers=num_layers,
        ffn_dim=32,
        **options,  # type: ignore[arg-type]
    )
    model: TaskModel = build(config, "token", feature_dim=FEATURES, edge_dim=EDGE_DIM)
    return model.eval()


def _batch() -> Batch:
    rng = np.random.default_rng(0)
    examples = []
    for size, pairs in EDGES.items():
        edges = np.array(pairs + [(j, i) for i, j in pairs], dtype=np.int64)
        examples.append(
            Example(
                None,
                rng.normal(size=(size, FEATURES)).astype(np.float32),
                ("a",) * size,
                "graph",
                edges=edges,
                edge_features=rng.normal(size=(len(edges), EDGE_DIM)).astype(np.float32),
            )
        )
    return Collator(None, None, LABELS, "token")(examples)


def _adjacency(include_self: bool = True) -> torch.Tensor:
    """``(B, L, L)``: True where node i may attend to node j."""
    length = max(EDGES)
    adjacency = torch.zeros(len(EDGES), length, length, dtype=torch.bool)
    for b, (size, pairs) in enumerate(EDGES.items()):
        for i, j in pairs:
            adjacency[b, i, j] = adjacency[b, j, i] = True
        if include_self:
            adjacency[b, range(size), range(size)] = True
    return adjacency


@pytest.mark.parametrize("include_self", [True, False])
def test_graph_maps_are_zero_off_the_edges_and_rows_sum_to_one(include_self: bool) -> None:
    model = _model(include_self=include_self)
    batch = _batch()
    maps = model.attention_maps(batch)
    assert len(maps) == 2 and all(m.shape == (2, HEADS, 5, 5) for m in maps)
    allowed = _adjacency(include_self)[:, None]  # (B, 1, L, L)
    real = ~batch.key_padding_mask
    for weights in maps:
        assert float(weights.masked_select(~allowed).abs().max()) == 0
        assert bool((weights.masked_select(allowed) > 0).all())  # and every edge gets some
        sums = weights.sum(-1)  # (B, H, L)
        torch.testing.assert_close(
            sums[real[:, None].expand_as(sums)], torch.ones(int(real.sum()) * HEADS)
        )


def test_graph_maps_are_the_weights_attention_uses() -> None:
    attention = GraphAttention(16, HEADS, edge_dim=EDGE_DIM)
    x = torch.randn(6, 16)
    edge_index = torch.tensor([[0, 1, 2, 2, 3, 4, 5, 0], [1, 2, 0, 3, 4, 5, 0, 0]])
    edge_attr = torch.randn(edge_index.shape[1], EDGE_DIM + 1)
    out, weights = attention(x, edge_index, edge_attr, need_weights=True)
    assert weights is not None and weights.shape == (edge_index.shape[1], HEADS)
    v = attention.v_proj(x).unflatten(-1, (HEADS, 8))
    by_hand = torch.zeros(6, HEADS, 8).index_add(
        0, edge_index[1], weights[:, :, None] * v[edge_index[0]]
    )
    torch.testing.assert_close(attention.out_proj(by_hand.flatten(1)), out)
    q, k = (proj(x).unflatten(-1, (HEADS, 8)) for proj in (attention.q_proj, attention.k_proj))
    reference = edge_attention(q, k, v, edge_index, edge_bias=attention.edge_proj(edge_attr))
    torch.testing.assert_close(by_hand, reference)


def test_without_self_loops_a_node_hears_only_its_neighbours() -> None:
    batch = _batch()
    with_self, without = _model(num_layers=1), _model(num_layers=1, include_self=False)
    without.load_state_dict(with_self.state_dict())
    assert not torch.allclose(with_self(batch), without(batch))
    # Node 4 of the path has one neighbour (3): without itself, all its weight goes there.
    maps = without.attention_maps(batch)
    torch.testing.assert_close(maps[0][0, :, 4, 3], torch.ones(HEADS))


def test_shared_weights_graph_has_one_block() -> None:
    shared, single = _model(num_layers=3, share_weights=True), _model(num_layers=1)
    count = sum(p.numel() for p in shared.parameters())
    assert count == sum(p.numel() for p in single.parameters())
    assert len(shared.attention_maps(_batch())) == 3
