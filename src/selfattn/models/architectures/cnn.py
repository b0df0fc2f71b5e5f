"""``cnn``: stacked 1-D convolutions, the lecture's CNN baseline (lecture 000)."""

from __future__ import annotations

from dataclasses import dataclass, field

from selfattn.models.option_groups import EncoderOptions, doc
from selfattn.models.registry import register_architecture


@register_architecture(
    "cnn", summary="stacked 1-D convolutions of kernel 2·window_k + 1", produces={"vectors"}
)
@dataclass(frozen=True)
class CNNOptions(EncoderOptions):
    """The options of ``architecture = "cnn"`` (``ffn_dim``: its channels)."""

    architecture: str = "cnn"
    window_k: int = field(default=5, metadata=doc("kernel half-width k (kernel size 2k + 1)"))
