"""``bigru``: a bidirectional GRU, the lecture's RNN baseline (lecture 000)."""

from __future__ import annotations

from dataclasses import dataclass

from selfattn.models.option_groups import EncoderOptions
from selfattn.models.registry import register_architecture


@register_architecture(
    "bigru", summary="a bidirectional GRU over the real positions", produces={"vectors"}
)
@dataclass(frozen=True)
class BiGRUOptions(EncoderOptions):
    """The options of ``architecture = "bigru"`` (``ffn_dim``: both directions' width)."""

    architecture: str = "bigru"
