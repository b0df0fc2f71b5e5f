"""Graph transformer: self-attention restricted to a graph's edges (lecture 000, §Graph).

On a graph a node attends only to the nodes joined to it — the lecture's point that
self-attention with the adjacency matrix as its mask *is* a graph neural network
(Veličković et al. 2018; the dot-product form of Dwivedi & Bresson 2021, and PyTorch
Geometric's ``TransformerConv``, Shi et al. 2021). Each block is a transformer block whose
attention is :func:`~selfattn.kernels.edge_attention` along the edge list, computed on
the batch's real nodes only (gathered out of the padded ``(B, L, E)`` batch), so its cost
grows with nodes + edges, never with L².

* **Self-loops.** Every node also attends to itself (GAT and ``TransformerConv`` add them
  too); a node without neighbours still sees its own vector. ``include_self=False``
  leaves them out: a node then hears only its neighbours.
* **Edge features.** Each block turns an edge's features ``e_ij`` (a bond's order) into
  one score bias per head, ``score_ij = q_i · k_j / √D + w_h · [e_ij, loop_ij]``; the last
  column flags the self-loops, so a head can learn how much a node listens to itself.
* **No positions.** A graph is a set: the encoder is permutation-equivariant (renumber
  the nodes and edges, and the outputs are renumbered the same way); a positional
  encoding is refused.
* **Attention maps.** :meth:`GraphTransformer.attention_maps` scatters each block's
  per-edge weights into a node × node ``(B, H, L, L)`` map, zero off the graph's edges.
* **No edges given** (a plain vector set): every node attends to every real node of its
  set, i.e. the complete graph — plain self-attention without positions.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from selfattn.blocks.config import BlockConfig
from selfattn.blocks.encoder_block import ResidualBlock, feed_forward, layer_norm
from selfattn.kernels.graph import dense_to_edge_index, edge_attention, scatter_softmax
from selfattn.models.checkpointing import run_block
from selfattn.models.config import StackConfig
from selfattn.models.encoder import stack_layers


class GraphAttention(nn.Module):
    """Multi-head attention of each node over its incoming edges.

    Args:
        embed_dim: E.
        num_heads: H (E must be divisible by H).
        edge_dim: D_e, features per edge (0 for none); the self-loop flag comes on top.
    """

    def __init__(self, embed_dim: int, num_heads: int, *, edge_dim: int = 0) -> None:
        super().__init__()
        if embed_dim % num_heads:
            raise ValueError(f"embed_dim ({embed_dim}) must be divisible by num_heads")
        self.num_heads, self.head_dim = num_heads, embed_dim // num_heads
        self.q_proj = nn.Linear(embed_dim, embed_dim)
        self.k_proj = nn.Linear(embed_dim, embed_dim)
        self.v_proj = nn.Linear(embed_dim, embed_dim)
        self.out_proj = nn.Linear(embed_dim, embed_dim)
        self.edge_proj = nn.Linear(edge_dim + 1, num_heads)  # + the self-loop flag

    def forward(
        self, x: Tensor, edge_index: Tensor, edge_attr: Tensor, *, need_weights: bool = False
    ) -> tuple[Tensor, Tensor | None]:
        """Args:
            x: ``(N, E)`` node vectors.
            edge_index: ``(2, E')`` long, rows (source j, target i); i attends to j.
            edge_attr: ``(E', D_e + 1)`` edge features with the self-loop flag last.
            need_weights: also return each edge's attention weight per head.

        Returns:
            ``(out (N, E), weights (E', H) or None)``; a node without incoming edges gets
            ``out_proj``'s bias.
        """
        q, k, v = (
            proj(x).unflatten(-1, (self.num_heads, self.head_dim))  # (N, H, D)
            for proj in (self.q_proj, self.k_proj, self.v_proj)
        )
        bias = self.edge_proj(edge_attr)  # (E', H)
        out = edge_attention(q, k, v, edge_index, edge_bias=bias)
        weights = edge_weights(q, k, edge_index, bias) if need_weights else None
        return self.out_proj(out.flatten(1)), weights  # (N, H·D) → (N, E)


def edge_weights(q: Tensor, k: Tensor, edge_index: Tensor, edge_bias: Tensor) -> Tensor:
    """The weights :func:`~selfattn.kernels.edge_attention` gives each edge, ``(E', H)``:
    ``softmax`` over each target's incoming edges of ``q_i · k_j / √D + bias_ij``."""
    source, target = edge_index[0], edge_index[1]
    scores = (q.index_select(0, target) * k.index_select(0, source)).sum(dim=-1)
    scores = scores / math.sqrt(q.shape[-1]) + edge_bias
    return scatter_softmax(scores, target, q.shape[0])


def check_graph_block(config: BlockConfig) -> None:
    """One-line errors for block options graph attention does not have."""
    fixed = {
        "score": "scaled_dot",
        "normalizer": "softmax",
        "attention": "dense",
        "attention_dropout": None,
        "num_kv_heads": None,
    }
    for name, value in fixed.items():
        if getattr(config, name) != value:
            raise ValueError(
                f"{name}={getattr(config, name)!r}: graph attention is scaled dot-product "
                f"softmax along the edges, with no other option; leave {name} at {value!r}"
            )


class GraphBlock(ResidualBlock):
    """A transformer encoder block whose attention follows the edges (pre- or post-LN).

    Args:
        config: the block's options (sizes, dropout, activation, pre/post-LN, ε, bias);
            the attention is always scaled dot-product softmax.
        edge_dim: D_e, features per edge.
    """

    def __init__(self, config: BlockConfig, *, edge_dim: int = 0) -> None:
        super().__init__(config)
        check_graph_block(config)
        self.attn = GraphAttention(config.embed_dim, config.num_heads, edge_dim=edge_dim)
        self.ffn = feed_forward(config)
        self.norm1, self.norm2 = layer_norm(config), layer_norm(config)
        self.dropout = nn.Dropout(config.dropout)

    def forward(
        self, x: Tensor, edge_index: Tensor, edge_attr: Tensor, *, need_weights: bool = False
    ) -> tuple[Tensor, Tensor | None]:
        """``(N, E)`` → ``((N, E), per-edge weights (E', H) or None)``."""
        attended, weights = self.attn(
            self.sublayer_input(x, self.norm1), edge_index, edge_attr, need_weights=need_weights
        )
        x = self.add_and_norm(x, self.dropout(attended), self.norm1)
        transformed = self.ffn(self.sublayer_input(x, self.norm2))
        return self.add_and_norm(x, self.dropout(transformed), self.norm2), weights


class GraphTransformer(nn.Module):
    """Stacked :class:`GraphBlock` s over a padded batch of graphs.

    Args:
        config: the stack's options: ``num_layers``, ``share_weights`` (one block applied
            ``num_layers`` times), ``include_self`` (self-loops), ``final_norm`` (default:
            after pre-LN blocks) and the block fields; ``positional`` must be ``None``.
        edge_dim: D_e, features per edge (``None`` or 0: edges without features).

    Attributes:
        checkpoint_activations: recompute each block's activations in the backward pass
            (:mod:`selfattn.models.checkpointing`); off by default.
    """

    checkpoint_activations: bool = False

    def __init__(self, config: StackConfig, *, edge_dim: int | None = None) -> None:
        super().__init__()
        if config.positional is not None:
            raise ValueError(
                f"positional={config.positional!r}: a graph is a set of nodes, its encoder "
                "takes no positions"
            )
        self.config = config
        self.edge_dim = edge_dim or 0
        self.blocks = stack_layers(config, lambda _: GraphBlock(config, edge_dim=self.edge_dim))
        self.final_norm = layer_norm(config) if config.has_final_norm else nn.Identity()

    def forward(
        self,
        x: Tensor,
        key_padding_mask: Tensor,
        edge_index: Tensor | None = None,
        edge_attr: Tensor | None = None,
    ) -> Tensor:
        """Args:
            x: ``(B, L, E)`` node vectors.
            key_padding_mask: ``(B, L)``, True at padding.
            edge_index: ``(2, E')`` long edges between flattened positions ``b·L + i``
                (:class:`~selfattn.datatypes.Batch`'s convention), or ``None`` for the
                complete graph of each set.
            edge_attr: ``(E', D_e)`` features of those edges, or ``None`` (zeros).

        Returns:
            ``(B, L, E)``, zeros at padding.
        """
        return self._run(x, key_padding_mask, edge_index, edge_attr, need_weights=False)[0]

    def attention_maps(
        self,
        x: Tensor,
        key_padding_mask: Tensor,
        edge_index: Tensor | None = None,
        edge_attr: Tensor | None = None,
    ) -> list[Tensor]:
        """Every block's attention as node × node maps, ``num_layers`` × ``(B, H, L, L)``:
        entry ``[b, h, i, j]`` is the weight node i gives node j (rows sum to 1 over a
        node's in-neighbours, itself included unless ``include_self`` is off), exactly 0
        where j → i is not an edge. Arguments as :meth:`forward`."""
        return self._run(x, key_padding_mask, edge_index, edge_attr, need_weights=True)[1]

    def _run(
        self,
        x: Tensor,
        key_padding_mask: Tensor,
        edge_index: Tensor | None,
        edge_attr: Tensor | None,
        *,
        need_weights: bool,
    ) -> tuple[Tensor, list[Tensor]]:
        """The blocks over the batch's real nodes: the output ``(B, L, E)`` and, when
        ``need_weights``, every block's dense maps."""
        batch, length, _ = x.shape
        nodes = (~key_padding_mask).reshape(-1).nonzero().squeeze(1)  # (N,) real positions
        edge_index, edge_attr = self._edges(key_padding_mask, nodes, edge_index, edge_attr)
        h = x.reshape(batch * length, -1)[nodes]  # (N, E): padding is never computed
        maps: list[Tensor] = []
        for block in self.blocks:
            h, weights = run_block(self, block, h, edge_index, edge_attr, need_weights=need_weights)
            if weights is not None:
                maps.append(_dense_map(weights, edge_index, nodes, batch, length))
        out = x.new_zeros(batch * length, x.shape[-1]).index_copy(0, nodes, self.final_norm(h))
        return out.reshape(batch, length, -1), maps

    def _edges(
        self,
        key_padding_mask: Tensor,
        nodes: Tensor,
        edge_index: Tensor | None,
        edge_attr: Tensor | None,
    ) -> tuple[Tensor, Tensor]:
        """The graph's edges renumbered over the real ``nodes`` (``0 .. N − 1``) plus a
        self-loop at each (unless ``include_self`` is off), and their ``(E', D_e + 1)``
        features, the self-loop flag last."""
        batch, length = key_padding_mask.shape
        device = key_padding_mask.device
        if edge_index is None:  # the complete graph of each set, self-loops added below
            others = ~torch.eye(length, dtype=torch.bool, device=device).expand(batch, -1, -1)
            edge_index, _ = dense_to_edge_index(others.contiguous(), key_padding_mask)
        else:
            renumber = torch.full((batch * length,), -1, dtype=torch.long, device=device)
            renumber[nodes] = torch.arange(nodes.numel(), device=device)
            edge_index = renumber[edge_index]
            if edge_index.numel() and int(edge_index.min()) < 0:
                raise ValueError("edge_index joins a padding position")
        num_edges, num_nodes = edge_index.shape[1], nodes.numel()
        if edge_attr is None:
            edge_attr = torch.zeros(num_edges, self.edge_dim, device=device)
        if edge_attr.shape != (num_edges, self.edge_dim):
            raise ValueError(
                f"edge_attr must have shape (E, D_e) = ({num_edges}, {self.edge_dim}), got "
                f"{tuple(edge_attr.shape)}"
            )
        num_loops = num_nodes if self.config.include_self else 0
        features = torch.zeros(num_edges + num_loops, self.edge_dim + 1, device=device)
        features[:num_edges, : self.edge_dim] = edge_attr
        features[num_edges:, -1] = 1.0
        loops = torch.arange(num_loops, device=device).expand(2, -1)
        return torch.cat([edge_index, loops], dim=1), features


def _dense_map(
    weights: Tensor, edge_index: Tensor, nodes: Tensor, batch: int, length: int
) -> Tensor:
    """Per-edge weights ``(E', H)`` over the real ``nodes`` as ``(B, H, L, L)`` maps (row:
    the attending node i, column: the attended node j; a repeated edge adds up)."""
    heads = weights.shape[1]
    source, target = nodes[edge_index[0]], nodes[edge_index[1]]  # flat positions b·L + i
    dense = weights.new_zeros(batch, heads, length, length)
    index = (
        (target // length)[:, None],
        torch.arange(heads, device=weights.device)[None, :],
        (target % length)[:, None],
        (source % length)[:, None],
    )
    return dense.index_put_(index, weights, accumulate=True)
