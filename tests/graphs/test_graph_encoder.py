"""The graph encoder: attention follows the edges, and the nodes' order does not matter."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from selfattn.data import Batch, Collator, Example, LabelVocabulary
from selfattn.models.composed import TaskModel
from selfattn.models.registry import model_options

from ..helpers_models import build

FEATURES, EDGE_DIM = 5, 3
LABELS = LabelVocabulary(["a", "b"])


def _model(task: str, num_layers: int, edge_dim: int | None = EDGE_DIM) -> TaskModel:
    config = model_options(
        architecture="graph", embed_dim=16, num_heads=2, num_layers=num_layers, ffn_dim=32
    )
    model: TaskModel = build(config, task, feature_dim=FEATURES, edge_dim=edge_dim)
    return model.eval()


def _undirected(pairs: list[tuple[int, int]]) -> np.ndarray:
    edges = np.array(pairs, dtype=np.int64)
    return np.concatenate([edges, edges[:, ::-1]])


def _graph(features: np.ndarray, edges: np.ndarray, task: str = "token", seed: int = 0) -> Example:
    rng = np.random.default_rng(seed)
    edge_features = np.eye(EDGE_DIM, dtype=np.float32)[rng.integers(0, EDGE_DIM, len(edges) // 2)]
    label = tuple("a" for _ in features) if task == "token" else "a"
    return Example(
        None,
        features.astype(np.float32),
        label,
        "test graph",
        edges=edges,
        edge_features=np.concatenate([edge_features, edge_features]),
    )


def _outputs(model: TaskModel, *examples: Example, task: str = "token") -> torch.Tensor:
    with torch.no_grad():
        return model(Collator(None, None, LABELS, task)(list(examples)))  # type: ignore[arg-type]


PATH = _undirected([(0, 1), (1, 2), (2, 3), (3, 4), (4, 5)])  # 0 - 1 - 2 - 3 - 4 - 5


@pytest.mark.parametrize("num_layers", [1, 2])
def test_a_node_ignores_nodes_beyond_its_receptive_field(num_layers: int) -> None:
    """One block: a node sees its neighbours; k blocks: nodes up to k edges away."""
    model = _model("token", num_layers)
    features = np.random.default_rng(0).normal(size=(6, FEATURES))
    changed = features.copy()
    changed[5] += 10.0  # node 5, the far end of the path
    before = _outputs(model, _graph(features, PATH))[0]
    after = _outputs(model, _graph(changed, PATH))[0]
    far = [node for node in range(6) if 5 - node > num_layers]  # not within reach of node 5
    near = [node for node in range(6) if 5 - node <= num_layers]
    torch.testing.assert_close(before[far], after[far])
    assert all(not torch.allclose(before[n], after[n]) for n in near)


def test_the_same_nodes_without_edges_see_each_other() -> None:
    """The contrast: a plain set (no edges) is the complete graph, and node 0 sees node 5."""
    model = _model("token", 1, edge_dim=None)
    features = np.random.default_rng(0).normal(size=(6, FEATURES)).astype(np.float32)
    changed = features.copy()
    changed[5] += 10.0
    before = _outputs(model, Example(None, features, ("a",) * 6, "set"))[0]
    after = _outputs(model, Example(None, changed, ("a",) * 6, "set"))[0]
    assert not torch.allclose(before[0], after[0])


def test_no_edges_is_the_complete_graph() -> None:
    model = _model("token", 2, edge_dim=None)
    features = np.random.default_rng(1).normal(size=(4, FEATURES)).astype(np.float32)
    complete = np.array([(j, i) for i in range(4) for j in range(4) if i != j])
    as_set = _outputs(model, Example(None, features, ("a",) * 4, "set"))
    as_graph = _outputs(model, Example(None, features, ("a",) * 4, "graph", edges=complete))
    torch.testing.assert_close(as_set, as_graph)


@pytest.mark.parametrize("task", ["token", "sequence"])
def test_renumbering_the_nodes_renumbers_the_outputs(task: str) -> None:
    rng = np.random.default_rng(2)
    features = rng.normal(size=(7, FEATURES))
    edges = _undirected([(0, 1), (1, 2), (2, 0), (2, 3), (3, 4), (5, 6), (4, 6)])
    graph = _graph(features, edges, task)
    assert graph.edge_features is not None
    perm = rng.permutation(7)  # node i becomes node new[i]; edges listed in a new order too
    new = np.argsort(perm)
    order = rng.permutation(len(edges))
    permuted = Example(
        None,
        features[perm].astype(np.float32),
        graph.label,
        "permuted",
        edges=new[edges][order],
        edge_features=graph.edge_features[order],
    )
    model = _model(task, 2)
    a, b = _outputs(model, graph, task=task), _outputs(model, permuted, task=task)
    if task == "token":
        torch.testing.assert_close(a[0, perm], b[0], atol=1e-5, rtol=1e-5)
    else:
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)


def test_a_graph_gives_the_same_outputs_alone_and_in_a_padded_batch() -> None:
    rng = np.random.default_rng(3)
    small = _graph(rng.normal(size=(3, FEATURES)), _undirected([(0, 1), (1, 2)]))
    large = _graph(rng.normal(size=(6, FEATURES)), PATH, seed=1)
    model = _model("token", 2)
    alone = _outputs(model, small)
    together = _outputs(model, large, small)
    torch.testing.assert_close(alone[0], together[1, :3], atol=1e-5, rtol=1e-5)


def test_edge_features_change_the_scores() -> None:
    features = np.random.default_rng(4).normal(size=(6, FEATURES))
    graph = _graph(features, PATH)
    assert graph.edge_features is not None
    other = Example(
        None,
        graph.features,
        graph.label,
        "other bonds",
        edges=graph.edges,
        edge_features=np.roll(graph.edge_features, 1, axis=1),
    )
    model = _model("token", 1)
    assert not torch.allclose(_outputs(model, graph), _outputs(model, other))


def test_edge_features_of_the_wrong_size_are_refused() -> None:
    model = _model("token", 1, edge_dim=2)
    batch: Batch = Collator(None, None, LABELS, "token")([_graph(np.zeros((6, FEATURES)), PATH)])
    with pytest.raises(ValueError, match=r"edge_attr must have shape \(E, D_e\) = \(10, 2\)"):
        model(batch)
