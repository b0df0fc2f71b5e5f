"""``lstm``: the neural Turing machine's baseline on the copy tasks, an LSTM and a linear
output (:mod:`selfattn.models.bits`)."""

from __future__ import annotations

from dataclasses import dataclass, field

from selfattn.models.option_groups import ModelOptions, doc
from selfattn.models.registry import register_architecture


@register_architecture(
    "lstm", summary="an LSTM over the steps (the copy tasks' baseline)", produces={"bit_steps"}
)
@dataclass(frozen=True)
class LSTMOptions(ModelOptions):
    """The options of ``architecture = "lstm"``."""

    architecture: str = "lstm"
    num_layers: int = field(default=2, metadata=doc("LSTM layers"))
    ffn_dim: int = field(default=256, metadata=doc("the LSTM's width"))
