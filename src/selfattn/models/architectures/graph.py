"""``graph``: self-attention along a graph's edges (lecture 000 §Graph; a GNN;
:mod:`selfattn.models.graph`)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from torch import Tensor

from selfattn.models.encoders import SequenceEncoder, stack_config
from selfattn.models.graph import GraphTransformer
from selfattn.models.option_groups import EncoderOptions, HeadsOptions, doc
from selfattn.models.registry import register_architecture


class GraphSequenceEncoder(SequenceEncoder):
    """A :class:`~selfattn.models.graph.GraphTransformer`: each node attends to its graph
    neighbours and itself (the batch's ``edge_index``, with ``edge_dim`` features per edge);
    without edges, to every real node of its set. It uses no positions."""

    name = "graph"

    def __init__(self, config: EncoderOptions, *, edge_dim: int | None = None) -> None:
        super().__init__()
        assert isinstance(config, GraphOptions)
        self.output_dim = config.embed_dim
        # A graph is a set: its options have no positions.
        stack = replace(stack_config(config), positional=None)
        self.encoder = GraphTransformer(stack, edge_dim=edge_dim)

    @classmethod
    def from_config(
        cls, config: EncoderOptions, *, max_len: int = 512, edge_dim: int | None = None
    ) -> SequenceEncoder:
        return cls(config, edge_dim=edge_dim)

    def forward(
        self,
        x: Tensor,
        key_padding_mask: Tensor,
        edge_index: Tensor | None = None,
        edge_attr: Tensor | None = None,
    ) -> Tensor:
        return self.encoder(x, key_padding_mask, edge_index, edge_attr)

    def attention_maps(
        self,
        x: Tensor,
        key_padding_mask: Tensor,
        edge_index: Tensor | None = None,
        edge_attr: Tensor | None = None,
    ) -> list[Tensor]:
        """Node × node maps per block, ``(B, H, L, L)``, zero off the graph's edges."""
        return self.encoder.attention_maps(x, key_padding_mask, edge_index, edge_attr)


@register_architecture(
    "graph",
    encoder=GraphSequenceEncoder,
    summary="self-attention along a graph's edges: each node attends to its neighbours",
    produces={"vectors"},
)
@dataclass(frozen=True)
class GraphOptions(HeadsOptions):
    """The options of ``architecture = "graph"`` (a graph is a set: no positions)."""

    architecture: str = "graph"
    norm_first: bool = field(default=True, metadata=doc("pre-LN blocks"))
    include_self: bool = field(default=True, metadata=doc("false: no node attends to itself"))
    share_weights: bool = field(default=False, metadata=doc("one block applied num_layers times"))
    ffn_dropout: float | None = field(
        default=0.0, metadata=doc("dropout on the feed-forward hidden layer; none: model.dropout")
    )
