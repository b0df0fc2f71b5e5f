"""Graph transformer: self-attention restricted to a graph's edges (lecture 000, §Graph).

On a graph a node attends only to the nodes joined to it — the lecture's point that
self-attention with the adjacency matrix as its mask *is* a graph neural network
(Veličković et al. 2018; the dot-product form of Dwivedi & Bresson 2021, and PyTorch
Geometric's ``TransformerConv``, Shi et al. 2021). Each block is a transformer block whose
attention is :func:`~selfattn.kernels.edge_attention` along the edge list, computed on
the batch's real nodes only (gathered out of the padded ``(B, L, E)`` batch), so its cost
grows with nodes + edges, never with L².

* **Self-loops.** Every node also attends to itself (GAT and ``TransformerConv`` add them
  too); a node without neighbours still sees its own vector.
* **Edge features.** Each block turns an edge's features ``e_ij`` (a bond's order) into
  one score bias per head, ``score_ij = q_i · k_j / √D + w_h · [e_ij, loop_ij]``; the last
  column flags the self-loops, so a head can learn how much a node listens to itself.
* **No positions.** A graph is a set: the encoder is permutation-equivariant (renumber
  the nodes and edges, and the outputs are renumbered the same way); the config's
  ``positional`` is not used.
* **No edges given** (a plain vector set): every node attends to every real node of its
  set, i.e. the complete graph — plain self-attention without positions.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from selfattn.blocks.feedforward import FeedForward
from selfattn.kernels.graph import dense_to_edge_index, edge_attention


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

    def forward(self, x: Tensor, edge_index: Tensor, edge_attr: Tensor) -> Tensor:
        """Args:
            x: ``(N, E)`` node vectors.
            edge_index: ``(2, E')`` long, rows (source j, target i); i attends to j.
            edge_attr: ``(E', D_e + 1)`` edge features with the self-loop flag last.

        Returns:
            ``(N, E)``; a node without incoming edges gets ``out_proj``'s bias.
        """
        q, k, v = (
            proj(x).unflatten(-1, (self.num_heads, self.head_dim))  # (N, H, D)
            for proj in (self.q_proj, self.k_proj, self.v_proj)
        )
        out = edge_attention(q, k, v, edge_index, edge_bias=self.edge_proj(edge_attr))
        return self.out_proj(out.flatten(1))  # (N, H·D) → (N, E)


class GraphBlock(nn.Module):
    """A transformer encoder block whose attention follows the edges (pre- or post-LN)."""

    def __init__(
        self,
        embed_dim: int,
        num_heads: int,
        ffn_dim: int,
        *,
        edge_dim: int = 0,
        dropout: float = 0.0,
        norm_first: bool = True,
    ) -> None:
        super().__init__()
        self.norm_first = norm_first
        self.attn = GraphAttention(embed_dim, num_heads, edge_dim=edge_dim)
        self.ffn = FeedForward(embed_dim, ffn_dim, dropout=dropout)
        self.norm1, self.norm2 = nn.LayerNorm(embed_dim), nn.LayerNorm(embed_dim)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor, edge_index: Tensor, edge_attr: Tensor) -> Tensor:
        """``(N, E)`` → ``(N, E)``."""
        h = self.norm1(x) if self.norm_first else x
        x = x + self.dropout(self.attn(h, edge_index, edge_attr))
        x = x if self.norm_first else self.norm1(x)
        h = self.norm2(x) if self.norm_first else x
        x = x + self.dropout(self.ffn(h))
        return x if self.norm_first else self.norm2(x)


class GraphTransformer(nn.Module):
    """Stacked :class:`GraphBlock` s over a padded batch of graphs.

    Args:
        embed_dim: E.
        num_heads: H.
        num_layers: blocks.
        ffn_dim: feed-forward width.
        edge_dim: D_e, features per edge (``None`` or 0: edges without features).
        dropout: on each sub-layer's output and inside the feed-forward network.
        norm_first: pre-LN blocks (then a final LayerNorm).
    """

    def __init__(
        self,
        embed_dim: int,
        num_heads: int,
        num_layers: int,
        ffn_dim: int,
        *,
        edge_dim: int | None = None,
        dropout: float = 0.0,
        norm_first: bool = True,
    ) -> None:
        super().__init__()
        self.edge_dim = edge_dim or 0
        self.blocks = nn.ModuleList(
            GraphBlock(
                embed_dim,
                num_heads,
                ffn_dim,
                edge_dim=self.edge_dim,
                dropout=dropout,
                norm_first=norm_first,
            )
            for _ in range(num_layers)
        )
        self.final_norm = nn.LayerNorm(embed_dim) if norm_first else nn.Identity()

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
                (:class:`~selfattn.data.types.Batch`'s convention), or ``None`` for the
                complete graph of each set.
            edge_attr: ``(E', D_e)`` features of those edges, or ``None`` (zeros).

        Returns:
            ``(B, L, E)``, zeros at padding.
        """
        batch, length, _ = x.shape
        nodes = (~key_padding_mask).reshape(-1).nonzero().squeeze(1)  # (N,) real positions
        edge_index, edge_attr = self._edges(key_padding_mask, nodes, edge_index, edge_attr)
        h = x.reshape(batch * length, -1)[nodes]  # (N, E): padding is never computed
        for block in self.blocks:
            h = block(h, edge_index, edge_attr)
        out = x.new_zeros(batch * length, x.shape[-1]).index_copy(0, nodes, self.final_norm(h))
        return out.reshape(batch, length, -1)

    def _edges(
        self,
        key_padding_mask: Tensor,
        nodes: Tensor,
        edge_index: Tensor | None,
        edge_attr: Tensor | None,
    ) -> tuple[Tensor, Tensor]:
        """The graph's edges renumbered over the real ``nodes`` (``0 .. N − 1``) plus a
        self-loop at each, and their ``(E', D_e + 1)`` features, the self-loop flag last."""
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
        features = torch.zeros(num_edges + num_nodes, self.edge_dim + 1, device=device)
        features[:num_edges, : self.edge_dim] = edge_attr
        features[num_edges:, -1] = 1.0
        loops = torch.arange(num_nodes, device=device).expand(2, -1)
        return torch.cat([edge_index, loops], dim=1), features
