"""``fc_window``: an MLP on each vector and its ±k neighbours (the HW2 "11 frames";
lecture 000 §Sequence Labeling)."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch.nn.functional as F
from torch import Tensor, nn

from selfattn.models.encoders import SequenceEncoder, mlp_layers, zero_padding
from selfattn.models.option_groups import EncoderOptions, doc
from selfattn.models.registry import register_architecture


class WindowFCEncoder(SequenceEncoder):
    """An MLP on the concatenation of each vector and its ±k neighbours (zeros past the ends).

    Args:
        embed_dim: E.
        hidden_dim: width of each layer (and E').
        num_layers: Linear → ReLU → dropout layers.
        k: half-width of the window, which holds 2k + 1 vectors.
        dropout: on the input and after each layer.
    """

    name = "fc_window"

    def __init__(
        self, embed_dim: int, hidden_dim: int, num_layers: int, k: int, dropout: float = 0.0
    ) -> None:
        super().__init__()
        self.k = k
        self.output_dim = hidden_dim
        self.input_dropout = nn.Dropout(dropout)
        self.mlp = mlp_layers((2 * k + 1) * embed_dim, hidden_dim, num_layers, dropout)

    @classmethod
    def from_config(cls, config: EncoderOptions, *, max_len: int = 512) -> SequenceEncoder:
        assert isinstance(config, WindowFCOptions)
        return cls(
            config.embed_dim, config.ffn_dim, config.num_layers, config.window_k, config.dropout
        )

    def forward(self, x: Tensor, key_padding_mask: Tensor) -> Tensor:
        x = zero_padding(self.input_dropout(x), key_padding_mask)
        padded = F.pad(x, (0, 0, self.k, self.k))  # (B, L + 2k, E)
        windows = padded.unfold(1, 2 * self.k + 1, 1)  # (B, L, E, 2k + 1)
        return self.mlp(windows.transpose(2, 3).flatten(2))  # (B, L, (2k + 1)·E) → (B, L, E')


@register_architecture(
    "fc_window",
    encoder=WindowFCEncoder,
    summary="an MLP on the ±window_k neighbourhood of each vector",
    produces={"vectors"},
)
@dataclass(frozen=True)
class WindowFCOptions(EncoderOptions):
    """The options of ``architecture = "fc_window"``."""

    architecture: str = "fc_window"
    window_k: int = field(default=5, metadata=doc("half-width k of the window (2k + 1 vectors)"))
