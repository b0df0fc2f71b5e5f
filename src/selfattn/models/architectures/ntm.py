"""``ntm``: a neural Turing machine (Graves et al. 2014; lecture 003) for the copy tasks
(:mod:`selfattn.models.bits`)."""

from __future__ import annotations

from dataclasses import dataclass, field

from selfattn.models.option_groups import ModelOptions, doc
from selfattn.models.registry import register_architecture


@register_architecture(
    "ntm",
    summary="a neural Turing machine: attention that reads and writes a memory",
    produces={"bit_steps"},
)
@dataclass(frozen=True)
class NTMOptions(ModelOptions):
    """The options of ``architecture = "ntm"``."""

    architecture: str = "ntm"
    ffn_dim: int = field(default=256, metadata=doc("the LSTM controller's size"))
    memory_size: int = field(default=50, metadata=doc("N: the memory's slots"))
    memory_width: int = field(default=20, metadata=doc("M: the numbers in each slot"))
