"""``rnn``: the RNN encoder–decoder with attention (Bahdanau et al. 2015, Luong et al. 2015;
lecture 003), the seq2seq model before the Transformer
(:mod:`selfattn.models.rnn_seq2seq`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from selfattn.models.option_groups import ModelOptions, check_score, doc
from selfattn.models.registry import register_architecture

RNNCellName = Literal["gru", "lstm"]


@register_architecture(
    "rnn",
    summary="the RNN encoder–decoder with attention (seq2seq)",
    produces={"sequence"},
)
@dataclass(frozen=True)
class RNNOptions(ModelOptions):
    """The options of ``architecture = "rnn"``."""

    architecture: str = "rnn"
    embed_dim: int = field(default=128, metadata=doc("size of the source and target embeddings"))
    num_layers: int = field(default=2, metadata=doc("layers of the encoder and of the decoder"))
    ffn_dim: int = field(
        default=256, metadata=doc("the decoder's state size; each encoder direction has half")
    )
    dropout: float = field(default=0.1, metadata=doc("dropout on embeddings and between layers"))
    score: str = field(
        default="scaled_dot",
        metadata=doc("the match of z and h: scaled_dot, dot, additive or general (zᵀ W h)"),
    )
    rnn_cell: RNNCellName = field(
        default="gru", metadata=doc("the encoder's and the decoder's cell: gru or lstm")
    )
    input_feeding: bool = field(
        default=True,
        metadata=doc("feed each step's attentional vector to the next step (Luong et al.)"),
    )

    def check(self) -> None:
        super().check()
        if self.ffn_dim % 2:
            raise ValueError(
                f"model.ffn_dim ({self.ffn_dim}) must be even for the rnn: each encoder "
                "direction has half of it"
            )
        check_score(self.score, rnn=True)
