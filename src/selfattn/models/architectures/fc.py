"""``fc``: an MLP on each vector alone, the lecture's first baseline: it cannot use
context at all (lecture 000 §Sequence Labeling)."""

from __future__ import annotations

from dataclasses import dataclass

from selfattn.models.option_groups import EncoderOptions
from selfattn.models.registry import register_architecture


@register_architecture(
    "fc", summary="an MLP on each vector alone (no context)", produces={"vectors"}
)
@dataclass(frozen=True)
class FCOptions(EncoderOptions):
    """The options of ``architecture = "fc"`` (``ffn_dim``: its hidden width)."""

    architecture: str = "fc"
