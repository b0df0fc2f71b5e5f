"""Our graph attention against PyTorch Geometric's ``TransformerConv`` on the same molecules.

Both models are the same graph transformer, built once from selfattn's ``graph`` encoder
(:mod:`selfattn.models.graph`) and once from PyG's ``TransformerConv`` (Shi et al. 2021):
a linear embedding of the atom features, ``num_layers`` pre-LN blocks ``x + Attn(LN(x))``,
``x + FFN(LN(x))``, a final LayerNorm, mean pooling over each molecule's atoms and a
linear classifier. Each atom attends to its bonded atoms and to itself (a self-loop with
its own edge flag in both). They differ in how the bond features enter attention: ours
adds one learned bias per head to each edge's score; ``TransformerConv`` adds a learned
edge vector to the key and to the value (and has no output projection). Both are trained
the same way here (AdamW with a one-cycle schedule, the same batches, epochs and seed; test
accuracy at the best dev epoch) on the ``solubility`` recipe, and timed on the same batches
in the same run, taking turns (best of 5 rounds): forward and forward + backward per
training batch, as a ratio ours ÷ PyG (< 1: ours is faster).

PyG is optional (``pip install 'selfattn[pyg]'`` or ``torch-geometric``); without it the
script says so and stops.

Usage::

    OMP_NUM_THREADS=1 python benchmarks/graph_pyg.py --epochs 30 --threads 1
"""

from __future__ import annotations

import argparse
import copy
import importlib.util
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from selfattn.config import load_config
from selfattn.data import Batch, batches
from selfattn.models.architectures import GraphOptions
from selfattn.models.task_model import build_model_from_spec
from selfattn.tasks import Prepared, prepare

CONFIG = Path(__file__).resolve().parent.parent / "configs" / "solubility.toml"


@dataclass
class GraphBatch:
    """A padded :class:`Batch` (ours) and the same graphs in PyG's flat form."""

    padded: Batch
    x: Tensor  # (N, F) the real nodes
    edge_index: Tensor  # (2, E + N) over 0..N-1, self-loops last
    edge_attr: Tensor  # (E + N, D_e + 1), the self-loop flag last
    graph: Tensor  # (N,) which graph each node belongs to
    labels: Tensor  # (B,)


def to_pyg(batch: Batch) -> GraphBatch:
    """The batch's real nodes numbered 0..N-1, its edges renumbered, self-loops added."""
    assert batch.features is not None and batch.edge_index is not None
    assert batch.edge_attr is not None
    keep = (~batch.key_padding_mask).reshape(-1)
    renumber = torch.cumsum(keep.long(), 0) - 1  # flat position → real-node number
    edges = renumber[batch.edge_index]
    num_nodes, num_edges = int(keep.sum()), edges.shape[1]
    loops = torch.arange(num_nodes).expand(2, -1)
    attr = torch.zeros(num_edges + num_nodes, batch.edge_attr.shape[1] + 1)
    attr[:num_edges, :-1] = batch.edge_attr
    attr[num_edges:, -1] = 1.0
    graph = torch.arange(batch.key_padding_mask.shape[0]).repeat_interleave(
        keep.reshape(batch.key_padding_mask.shape).sum(1)
    )
    x = batch.features.reshape(-1, batch.features.shape[-1])[keep]
    return GraphBatch(batch, x, torch.cat([edges, loops], 1), attr, graph, batch.labels)


class PyGTransformer(nn.Module):
    """The same model as selfattn's ``graph`` encoder + mean pooling, from ``TransformerConv``."""

    def __init__(
        self, config: GraphOptions, feature_dim: int, edge_dim: int, num_labels: int
    ) -> None:
        from torch_geometric.nn import TransformerConv

        super().__init__()
        embed, heads = config.embed_dim, config.num_heads
        self.embed = nn.Linear(feature_dim, embed)
        self.convs = nn.ModuleList(
            TransformerConv(
                embed, embed // heads, heads=heads, edge_dim=edge_dim + 1, root_weight=False
            )
            for _ in range(config.num_layers)
        )
        self.ffns = nn.ModuleList(
            nn.Sequential(
                nn.Linear(embed, config.ffn_dim), nn.ReLU(), nn.Linear(config.ffn_dim, embed)
            )
            for _ in range(config.num_layers)
        )
        self.norms = nn.ModuleList(nn.LayerNorm(embed) for _ in range(2 * config.num_layers + 1))
        self.dropout = nn.Dropout(config.dropout)
        self.head = nn.Linear(embed, num_labels)

    def forward(self, batch: GraphBatch) -> Tensor:
        from torch_geometric.nn import global_mean_pool

        x = self.embed(batch.x)
        for i, (conv, ffn) in enumerate(zip(self.convs, self.ffns, strict=True)):
            x = x + self.dropout(conv(self.norms[2 * i](x), batch.edge_index, batch.edge_attr))
            x = x + self.dropout(ffn(self.norms[2 * i + 1](x)))
        pooled = global_mean_pool(self.norms[-1](x), batch.graph)
        return self.head(self.dropout(pooled))


class Ours(nn.Module):
    """selfattn's task model, reading the padded batch."""

    def __init__(self, prepared: Prepared, config: GraphOptions) -> None:
        super().__init__()
        self.model = build_model_from_spec(config, prepared.spec)  # solubility: "sequence"

    def forward(self, batch: GraphBatch) -> Tensor:
        return self.model(batch.padded)


def per_batch_seconds(
    models: dict[str, nn.Module], data: list[GraphBatch], backward: bool
) -> dict[str, float]:
    """Mean seconds per batch of a forward (and backward) pass over ``data``: the best of
    5 rounds, the models taking turns in each round (so a busy machine slows both alike)."""
    best = dict.fromkeys(models, float("inf"))
    for _ in range(5):
        for name, model in models.items():
            model.train()
            start = time.perf_counter()
            for batch in data:
                logits = model(batch)
                if backward:
                    F.cross_entropy(logits, batch.labels).backward()
                    model.zero_grad(set_to_none=True)
            best[name] = min(best[name], (time.perf_counter() - start) / len(data))
    return best


@torch.no_grad()
def accuracy(model: nn.Module, data: list[GraphBatch]) -> float:
    model.eval()
    correct = sum(int((model(b).argmax(-1) == b.labels).sum()) for b in data)
    return correct / sum(len(b.labels) for b in data)


def train(
    model: nn.Module,
    train_data: Callable[[int], list[GraphBatch]],
    dev: list[GraphBatch],
    test: list[GraphBatch],
    epochs: int,
    lr: float,
) -> dict[str, Any]:
    """AdamW with a one-cycle schedule; the test accuracy of the best dev epoch."""
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    steps = epochs * len(train_data(0))
    schedule = torch.optim.lr_scheduler.OneCycleLR(optimizer, lr, total_steps=steps)
    best: dict[str, Any] = {"dev": -1.0}
    start = time.perf_counter()
    for epoch in range(1, epochs + 1):
        model.train()
        for batch in train_data(epoch):
            loss = F.cross_entropy(model(batch), batch.labels)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            schedule.step()
        dev_accuracy = accuracy(model, dev)
        if dev_accuracy > best["dev"]:
            best = {"dev": dev_accuracy, "epoch": epoch, "state": copy.deepcopy(model.state_dict())}
    model.load_state_dict(best.pop("state"))
    return {**best, "test": accuracy(model, test), "train_s": time.perf_counter() - start}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--epochs", type=int, default=30)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    if importlib.util.find_spec("torch_geometric") is None:
        print("torch_geometric is not installed (pip install torch-geometric): nothing to compare")
        return
    import torch_geometric

    torch.set_num_threads(args.threads)
    config = load_config(CONFIG, [])
    prepared = prepare(config)
    assert isinstance(prepared, Prepared) and prepared.spec.edge_dim is not None
    size = config.data.batch_size

    def collate(examples: list[Any], shuffle: bool, seed: int = 0) -> list[GraphBatch]:
        groups = batches(examples, size, shuffle=shuffle, seed=seed)
        return [to_pyg(prepared.task.collate(group)) for group in groups]

    splits = prepared.splits
    dev, test = collate(splits.dev, False), collate(splits.test, False)
    epochs_data = {0: collate(splits.train, True, args.seed * 1000)}

    def train_data(epoch: int) -> list[GraphBatch]:
        if epoch not in epochs_data:
            epochs_data[epoch] = collate(splits.train, True, args.seed * 1000 + epoch)
        return epochs_data[epoch]

    spec = prepared.spec
    options = config.model
    assert isinstance(options, GraphOptions), "a graph config (karate, solubility)"
    models: dict[str, nn.Module] = {}
    for name in ("selfattn", "pyg"):
        torch.manual_seed(args.seed)
        models[name] = (
            Ours(prepared, options)
            if name == "selfattn"
            else PyGTransformer(options, spec.feature_dim or 0, spec.edge_dim, spec.num_labels)
        )
    forward = per_batch_seconds(models, train_data(0), backward=False)
    step = per_batch_seconds(models, train_data(0), backward=True)
    results = {}
    for name, model in models.items():
        torch.manual_seed(args.seed)  # the same dropout draws for both
        results[name] = {
            "params": sum(p.numel() for p in model.parameters()),
            "forward_ms": 1e3 * forward[name],
            "train_ms": 1e3 * step[name],
            **train(model, train_data, dev, test, args.epochs, args.lr),
        }

    ours, pyg = results["selfattn"], results["pyg"]
    print(
        f"solubility: {len(splits.train)} train / {len(splits.dev)} dev / {len(splits.test)} "
        f"test molecules, batches of {size}; {args.epochs} epochs, {args.threads} thread(s); "
        f"torch {torch.__version__}, torch_geometric {torch_geometric.__version__}"
    )
    print(f"{'model':<10} {'params':>7} {'fwd ms':>7} {'fwd+bwd ms':>10} {'dev':>6} {'test':>6}")
    for name, r in results.items():
        print(
            f"{name:<10} {r['params']:>7,} {r['forward_ms']:>7.2f} {r['train_ms']:>10.2f} "
            f"{r['dev']:>6.3f} {r['test']:>6.3f}   (best epoch {r['epoch']}, "
            f"{r['train_s']:.0f} s training)"
        )
    print(
        f"ours ÷ PyG per batch: forward {ours['forward_ms'] / pyg['forward_ms']:.2f}, "
        f"forward + backward {ours['train_ms'] / pyg['train_ms']:.2f}"
    )


if __name__ == "__main__":
    main()
