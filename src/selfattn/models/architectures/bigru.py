"""``bigru``: a bidirectional GRU, the lecture's RNN baseline (lecture 000)."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from selfattn.models.encoders import SequenceEncoder, zero_padding
from selfattn.models.option_groups import EncoderOptions
from selfattn.models.recurrent import bidirectional_rnn, run_packed
from selfattn.models.registry import register_architecture


class BiGRUEncoder(SequenceEncoder):
    """A bidirectional GRU over the real positions only (packed sequences).

    Args:
        embed_dim: E.
        hidden_dim: E', split evenly between the two directions (must be even).
        num_layers: stacked GRU layers.
        dropout: on the input and between layers.
    """

    name = "bigru"

    def __init__(self, embed_dim: int, hidden_dim: int, num_layers: int, dropout: float = 0.0):
        super().__init__()
        if hidden_dim % 2:
            raise ValueError(f"bigru needs an even hidden size (ffn_dim), got {hidden_dim}")
        self.output_dim = hidden_dim
        self.input_dropout = nn.Dropout(dropout)
        self.gru = bidirectional_rnn(nn.GRU, embed_dim, hidden_dim, num_layers, dropout)

    @classmethod
    def from_config(cls, config: EncoderOptions, *, max_len: int = 512) -> SequenceEncoder:
        return cls(config.embed_dim, config.ffn_dim, config.num_layers, config.dropout)

    def forward(self, x: Tensor, key_padding_mask: Tensor) -> Tensor:
        lengths = (~key_padding_mask).sum(dim=1)
        positions = torch.arange(x.shape[1], device=x.device)
        if not torch.equal(key_padding_mask, positions >= lengths[:, None]):
            raise ValueError("bigru needs right-padded sequences (padding after the tokens)")
        # Packed sequences want lengths ≥ 1; an all-padding row stays zero.
        out = run_packed(self.gru, self.input_dropout(x), lengths.clamp(min=1))
        return zero_padding(out, key_padding_mask)


@register_architecture(
    "bigru",
    encoder=BiGRUEncoder,
    summary="a bidirectional GRU over the real positions",
    produces={"vectors"},
)
@dataclass(frozen=True)
class BiGRUOptions(EncoderOptions):
    """The options of ``architecture = "bigru"`` (``ffn_dim``: both directions' width)."""

    architecture: str = "bigru"
