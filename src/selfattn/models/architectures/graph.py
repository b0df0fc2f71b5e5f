"""``graph``: self-attention along a graph's edges (lecture 000 §Graph; a GNN;
:mod:`selfattn.models.graph`)."""

from __future__ import annotations

from dataclasses import dataclass, field

from selfattn.models.option_groups import EncoderOptions, check_heads, doc
from selfattn.models.registry import register_architecture


@register_architecture(
    "graph",
    summary="self-attention along a graph's edges: each node attends to its neighbours",
    produces={"vectors"},
)
@dataclass(frozen=True)
class GraphOptions(EncoderOptions):
    """The options of ``architecture = "graph"`` (a graph is a set: no positions)."""

    architecture: str = "graph"
    num_heads: int = field(
        default=4, metadata=doc("H: attention heads (embed_dim must be divisible by it)")
    )
    norm_first: bool = field(default=True, metadata=doc("pre-LN blocks"))
    include_self: bool = field(default=True, metadata=doc("false: no node attends to itself"))
    share_weights: bool = field(default=False, metadata=doc("one block applied num_layers times"))
    ffn_dropout: float | None = field(
        default=0.0, metadata=doc("dropout on the feed-forward hidden layer; none: model.dropout")
    )

    def check(self) -> None:
        super().check()
        check_heads(self.embed_dim, self.num_heads)
