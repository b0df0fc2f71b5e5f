"""``cnn2d``: a 2-D CNN over an image's pixel grid, self-attention with a fixed
neighbourhood (lecture 000 §Self-attention v.s. CNN; :mod:`selfattn.models.vision`)."""

from __future__ import annotations

from dataclasses import dataclass, field

from selfattn.models.option_groups import EncoderOptions, doc
from selfattn.models.registry import register_architecture


@register_architecture(
    "cnn2d",
    summary="a 2-D CNN over an image recipe's pixel grid",
    produces={"image_vectors"},
)
@dataclass(frozen=True)
class CNN2DOptions(EncoderOptions):
    """The options of ``architecture = "cnn2d"`` (``ffn_dim``: its channels)."""

    architecture: str = "cnn2d"
    window_k: int = field(default=5, metadata=doc("kernel half-width k (kernel size 2k + 1)"))
