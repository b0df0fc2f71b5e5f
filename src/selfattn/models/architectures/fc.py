"""``fc``: an MLP on each vector alone, the lecture's first baseline: it cannot use
context at all (lecture 000 §Sequence Labeling)."""

from __future__ import annotations

from dataclasses import dataclass

from torch import Tensor, nn

from selfattn.models.encoders import SequenceEncoder, mlp_layers
from selfattn.models.option_groups import EncoderOptions
from selfattn.models.registry import register_architecture


class FCEncoder(SequenceEncoder):
    """An MLP applied to each vector alone: it cannot use context at all.

    Args:
        embed_dim: E.
        hidden_dim: width of each layer (and E').
        num_layers: Linear → ReLU → dropout layers.
        dropout: on the input and after each layer.
    """

    name = "fc"

    def __init__(self, embed_dim: int, hidden_dim: int, num_layers: int, dropout: float = 0.0):
        super().__init__()
        self.output_dim = hidden_dim
        self.input_dropout = nn.Dropout(dropout)
        self.mlp = mlp_layers(embed_dim, hidden_dim, num_layers, dropout)

    @classmethod
    def from_config(cls, config: EncoderOptions, *, max_len: int = 512) -> SequenceEncoder:
        return cls(config.embed_dim, config.ffn_dim, config.num_layers, config.dropout)

    def forward(self, x: Tensor, key_padding_mask: Tensor) -> Tensor:
        return self.mlp(self.input_dropout(x))


@register_architecture(
    "fc",
    encoder=FCEncoder,
    summary="an MLP on each vector alone (no context)",
    produces={"vectors"},
)
@dataclass(frozen=True)
class FCOptions(EncoderOptions):
    """The options of ``architecture = "fc"`` (``ffn_dim``: its hidden width)."""

    architecture: str = "fc"
