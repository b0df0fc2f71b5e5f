"""``fc_window``: an MLP on each vector and its ±k neighbours (the HW2 "11 frames";
lecture 000 §Sequence Labeling)."""

from __future__ import annotations

from dataclasses import dataclass, field

from selfattn.models.option_groups import EncoderOptions, doc
from selfattn.models.registry import register_architecture


@register_architecture(
    "fc_window",
    summary="an MLP on the ±window_k neighbourhood of each vector",
    produces={"vectors"},
)
@dataclass(frozen=True)
class WindowFCOptions(EncoderOptions):
    """The options of ``architecture = "fc_window"``."""

    architecture: str = "fc_window"
    window_k: int = field(default=5, metadata=doc("half-width k of the window (2k + 1 vectors)"))
