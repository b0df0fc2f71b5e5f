"""``cnn2d``: a 2-D CNN over an image's pixel grid, self-attention with a fixed
neighbourhood (lecture 000 §Self-attention v.s. CNN; :mod:`selfattn.models.vision`)."""

from __future__ import annotations

from dataclasses import dataclass

from torch import Tensor, nn

from selfattn.models.encoders import SequenceEncoder
from selfattn.models.option_groups import ConvolutionOptions, EncoderOptions
from selfattn.models.registry import register_architecture
from selfattn.vision import vectors_to_image


class CNN2DEncoder(SequenceEncoder):
    """A small 2-D CNN over the grid of pixel vectors: the lecture's ViT-vs-CNN baseline.

    ``num_layers`` × (Conv2d k × k "same" → ReLU → dropout → 2 × 2 max-pool while both
    sides are even), ``hidden_dim`` channels. To keep the contract of every
    :class:`~selfattn.models.encoders.SequenceEncoder` — one output vector per input
    vector — each pixel gets the final feature of the cell it was pooled into
    (nearest-neighbour upsampling); every cell covers the same number of pixels, so the
    head's mean pooling over pixels is exactly the CNN's global average pooling.

    Args:
        embed_dim: E, channels of the input grid (the per-pixel embedding).
        hidden_dim: channels of each convolution (and E').
        num_layers: convolution layers.
        grid: ``(rows, cols)`` of the input vectors.
        k: kernel half-width: kernel size 2k + 1 (``model.window_k``; 1 gives 3 × 3).
        dropout: after each convolution.
    """

    name = "cnn2d"

    def __init__(
        self,
        embed_dim: int,
        hidden_dim: int,
        num_layers: int,
        grid: tuple[int, int],
        *,
        k: int = 1,
        dropout: float = 0.0,
    ) -> None:
        super().__init__()
        self.output_dim = hidden_dim
        self.grid = grid
        layers: list[nn.Module] = []
        rows, cols = grid
        for i in range(num_layers):
            conv = nn.Conv2d(embed_dim if i == 0 else hidden_dim, hidden_dim, 2 * k + 1, padding=k)
            layers += [conv, nn.ReLU(), nn.Dropout(dropout)]
            if rows % 2 == 0 and cols % 2 == 0:
                layers.append(nn.MaxPool2d(2))
                rows, cols = rows // 2, cols // 2
        self.net = nn.Sequential(*layers)
        self.scale = (grid[0] // rows, grid[1] // cols)  # pixels per output cell, per side

    @classmethod
    def from_config(cls, config: EncoderOptions, *, max_len: int = 512) -> SequenceEncoder:
        raise ValueError(
            "architecture 'cnn2d' needs the image grid: build it with build_image_encoder"
        )

    @classmethod
    def for_grid(cls, config: EncoderOptions, grid: tuple[int, int]) -> CNN2DEncoder:
        """The encoder ``config`` describes, for a ``rows × cols`` grid of vectors."""
        assert isinstance(config, CNN2DOptions)
        return cls(
            config.embed_dim,
            config.ffn_dim,
            config.num_layers,
            grid,
            k=config.window_k,
            dropout=config.dropout,
        )

    def forward(self, x: Tensor, key_padding_mask: Tensor) -> Tensor:
        """``(B, rows·cols, E)`` → ``(B, rows·cols, hidden_dim)``."""
        rows, cols = self.grid
        if x.shape[1] != rows * cols:
            raise ValueError(
                f"cnn2d expects {rows}×{cols} = {rows * cols} vectors, got {x.shape[1]}"
            )
        features = self.net(vectors_to_image(x, rows, cols))  # (B, E', rows/s, cols/s)
        features = features.repeat_interleave(self.scale[0], dim=2)
        features = features.repeat_interleave(self.scale[1], dim=3)  # (B, E', rows, cols)
        return features.flatten(2).transpose(1, 2)


@register_architecture(
    "cnn2d",
    encoder=CNN2DEncoder,
    summary="a 2-D CNN over an image recipe's pixel grid",
    produces={"image_vectors"},
)
@dataclass(frozen=True)
class CNN2DOptions(ConvolutionOptions):
    """The options of ``architecture = "cnn2d"`` (``ffn_dim``: its channels)."""

    architecture: str = "cnn2d"
