"""``cnn``: stacked 1-D convolutions, the lecture's CNN baseline (lecture 000)."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from selfattn.models.encoders import SequenceEncoder, zero_padding
from selfattn.models.option_groups import ConvolutionOptions, EncoderOptions
from selfattn.models.registry import register_architecture


class CNNEncoder(SequenceEncoder):
    """Stacked 1-D convolutions with "same" padding; padding is zeroed before each one.

    Zeroing the padded positions makes them look exactly like the zeros beyond the end of
    a sequence, so no amount of padding changes what a real position sees.

    Args:
        embed_dim: E.
        hidden_dim: channels of each convolution (and E').
        num_layers: Conv → ReLU → dropout layers.
        k: kernel half-width (kernel size 2k + 1).
        dropout: on the input and after each layer.
    """

    name = "cnn"

    def __init__(
        self, embed_dim: int, hidden_dim: int, num_layers: int, k: int, dropout: float = 0.0
    ) -> None:
        super().__init__()
        self.output_dim = hidden_dim
        self.input_dropout = nn.Dropout(dropout)
        self.convs = nn.ModuleList(
            nn.Conv1d(embed_dim if i == 0 else hidden_dim, hidden_dim, 2 * k + 1, padding=k)
            for i in range(num_layers)
        )
        self.dropout = nn.Dropout(dropout)

    @classmethod
    def from_config(cls, config: EncoderOptions, *, max_len: int = 512) -> SequenceEncoder:
        assert isinstance(config, CNNOptions)
        return cls(
            config.embed_dim, config.ffn_dim, config.num_layers, config.window_k, config.dropout
        )

    def forward(self, x: Tensor, key_padding_mask: Tensor) -> Tensor:
        x = self.input_dropout(x)
        for conv in self.convs:
            x = zero_padding(x, key_padding_mask)
            x = self.dropout(torch.relu(conv(x.transpose(1, 2)).transpose(1, 2)))  # (B, L, E')
        return zero_padding(x, key_padding_mask)


@register_architecture(
    "cnn",
    encoder=CNNEncoder,
    summary="stacked 1-D convolutions of kernel 2·window_k + 1",
    produces={"vectors"},
)
@dataclass(frozen=True)
class CNNOptions(ConvolutionOptions):
    """The options of ``architecture = "cnn"`` (``ffn_dim``: its channels)."""

    architecture: str = "cnn"
