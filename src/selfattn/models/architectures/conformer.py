"""``conformer``: self-attention and a depthwise convolution in every block (Gulati et al.
2020; the lecture's "you can also use both" for speech)."""

from __future__ import annotations

from dataclasses import dataclass, field

from selfattn.models.conformer import Conformer
from selfattn.models.encoders import AttentionSequenceEncoder
from selfattn.models.option_groups import AttentionStackOptions, doc
from selfattn.models.registry import register_architecture


class ConformerSequenceEncoder(AttentionSequenceEncoder):
    """A :class:`~selfattn.models.Conformer` (Gulati et al. 2020): self-attention for the
    whole sequence plus a depthwise convolution of kernel ``2·window_k + 1`` in every block —
    the lecture's hint for speech ("you can also use both")."""

    name = "conformer"

    stack_type = Conformer


@register_architecture(
    "conformer",
    encoder=ConformerSequenceEncoder,
    summary="Conformer blocks: self-attention + a convolution of kernel 2·window_k + 1",
    produces={"vectors", "encoder_stack"},
    losses=('ponder cost (halting = "act")', "every block's exit loss (exit_heads)"),
    cls_token=True,
)
@dataclass(frozen=True)
class ConformerOptions(AttentionStackOptions):
    """The options of ``architecture = "conformer"`` (always pre-normalised)."""

    architecture: str = "conformer"
    window_k: int = field(
        default=5, metadata=doc("half-width k of the depthwise convolution (kernel 2k + 1)")
    )
    ffn_dropout: float | None = field(
        default=0.0, metadata=doc("dropout on the feed-forward hidden layers; none: model.dropout")
    )
