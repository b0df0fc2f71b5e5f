"""``memn2n``: an end-to-end memory network (Sukhbaatar et al. 2015; lecture 003): a
story's facts are its memories, its question reads them over ``num_layers`` hops
(:mod:`selfattn.models.memory`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from selfattn.models.option_groups import ModelOptions, doc
from selfattn.models.registry import register_architecture

MemoryTying = Literal["adjacent", "layerwise"]


@register_architecture(
    "memn2n",
    summary="an end-to-end memory network: a question reads a story's facts over hops",
    produces={"answer"},
    losses=("none, but linear start: the first linear_start_steps without the softmax",),
)
@dataclass(frozen=True)
class MemN2NOptions(ModelOptions):
    """The options of ``architecture = "memn2n"``."""

    architecture: str = "memn2n"
    embed_dim: int = field(default=128, metadata=doc("size of the memory and question embeddings"))
    num_layers: int = field(default=2, metadata=doc("hops over the memories"))
    memory_size: int = field(default=50, metadata=doc("the most recent facts kept as memories"))
    memory_tying: MemoryTying = field(
        default="adjacent",
        metadata=doc("adjacent (each hop's output embedding is the next's input) or layerwise"),
    )
    linear_start_steps: int = field(
        default=0,
        metadata=doc("train the first this many steps without the hops' softmax (0: never)"),
    )
    memory_noise: float = field(
        default=0.0,
        metadata=doc("training: an empty memory before each fact with this probability"),
    )
