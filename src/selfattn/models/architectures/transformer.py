"""``transformer``: self-attention blocks (lecture 000–001), the encoder of token,
sequence and regression tasks and of the encoder–decoder; or, with ``pretrained``, a BERT
checkpoint's encoder (:mod:`selfattn.models.pretrained`)."""

from __future__ import annotations

from dataclasses import dataclass, field

from selfattn.models.encoder import Encoder
from selfattn.models.encoders import AttentionSequenceEncoder
from selfattn.models.option_groups import AttentionStackOptions, doc
from selfattn.models.registry import register_architecture


class TransformerSequenceEncoder(AttentionSequenceEncoder):
    """selfattn's :class:`~selfattn.models.Encoder`."""

    name = "transformer"

    stack_type = Encoder


@register_architecture(
    "transformer",
    encoder=TransformerSequenceEncoder,
    summary="self-attention blocks: every vector considers the whole set at once",
    produces={"vectors", "encoder_stack"},
    losses=('ponder cost (halting = "act")', "every block's exit loss (exit_heads)"),
    cls_token=True,
)
@dataclass(frozen=True)
class TransformerOptions(AttentionStackOptions):
    """The options of ``architecture = "transformer"``."""

    architecture: str = "transformer"
    norm_first: bool = field(
        default=True, metadata=doc("pre-LN blocks (train stably with little warm-up)")
    )
    ffn_dropout: float | None = field(
        default=0.0, metadata=doc("dropout on the feed-forward hidden layer; none: model.dropout")
    )
    pretrained: str | None = field(
        default=None,
        metadata=doc("start from a BERT checkpoint: a registered name (minilm-l6) or a folder"),
    )
