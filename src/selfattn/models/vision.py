"""Image models over an image recipe's pixel vectors (lecture 000, §Self-attention for
Image; §Self-attention v.s. CNN).

An image recipe (:mod:`selfattn.data.recipes.images`) gives each image as ``(H·W, C)`` pixel
vectors. :class:`ImageEmbedding` folds them back into the ``(C, H, W)`` grid and cuts it
into vectors again, one per pixel or one per P × P patch (ViT, Dosovitskiy et al. 2021),
adding a 2-D positional encoding of each vector's (row, column); any sequence encoder
then reads them. :class:`CNN2DEncoder` is the lecture's comparison: a small 2-D CNN, a
self-attention whose receptive field is fixed to a neighbourhood — the better model with
little data, self-attention's flexibility paying off only with more.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from selfattn.data.types import Batch
from selfattn.models.encoders import SequenceEncoder
from selfattn.models.options import ModelConfig
from selfattn.positional import GRID_POSITIONAL
from selfattn.positional.grid import GridPositional
from selfattn.vision import PatchEmbedding, PixelEmbedding, vectors_to_image

ImageShape = tuple[int, int, int]


class ImageEmbedding(nn.Module):
    """A batch of pixel vectors → one vector per pixel or patch, with 2-D positions.

    Args:
        image_shape: ``(H, W, C)`` of every image.
        embed_dim: E.
        patch_size: P for P × P patches (:class:`~selfattn.vision.PatchEmbedding`), or
            ``None`` for one vector per pixel (:class:`~selfattn.vision.PixelEmbedding`).
        grid_positional: a key of :data:`selfattn.positional.GRID_POSITIONAL`, or ``None``.

    Raises:
        ValueError: P does not divide H and W, or an unknown grid encoding.
    """

    def __init__(
        self,
        image_shape: ImageShape,
        embed_dim: int,
        *,
        patch_size: int | None = None,
        grid_positional: str | None = None,
    ) -> None:
        super().__init__()
        height, width, channels = image_shape
        if patch_size is not None and (height % patch_size or width % patch_size):
            raise ValueError(
                f"model.patch_size: {patch_size} × {patch_size} patches do not tile a "
                f"{height} × {width} image; choose a divisor of both sides"
            )
        if grid_positional is not None and grid_positional not in GRID_POSITIONAL:
            raise ValueError(
                f"model.grid_positional: unknown encoding {grid_positional!r}; choose one of "
                f"{', '.join(GRID_POSITIONAL)} or none"
            )
        self.image_shape = image_shape
        self.embed_dim = embed_dim
        self.cut: PixelEmbedding | PatchEmbedding = (
            PixelEmbedding(channels, embed_dim)
            if patch_size is None
            else PatchEmbedding(channels, embed_dim, patch_size)
        )
        self.grid = self.cut.grid_shape(height, width)  # (rows, cols) of output vectors
        self.positional: GridPositional | None = None
        if grid_positional is not None:
            rows, cols = self.grid
            self.positional = GRID_POSITIONAL[grid_positional].build(
                embed_dim=embed_dim, max_rows=rows, max_cols=cols
            )

    @property
    def num_vectors(self) -> int:
        """N, the vectors per image: rows · cols of :attr:`grid`."""
        return self.grid[0] * self.grid[1]

    def image(self, batch: Batch) -> Tensor:
        """The batch's images, ``(B, C, H, W)``.

        Raises:
            ValueError: the batch holds no features, or not ``H·W`` vectors of C values.
        """
        height, width, channels = self.image_shape
        if batch.features is None:
            raise ValueError("this image model reads pixel vectors, but the batch has none")
        if batch.features.shape[1:] != (height * width, channels):
            raise ValueError(
                f"this image model reads {height}×{width} images of {channels} channel(s), "
                f"i.e. ({height * width}, {channels}) pixel vectors per example; got "
                f"{tuple(batch.features.shape[1:])}"
            )
        return vectors_to_image(batch.features, height, width)

    def forward(self, batch: Batch) -> Tensor:
        """Returns ``(B, N, E)``, row-major over :attr:`grid`."""
        x = self.cut(self.image(batch))  # (B, N, E)
        if self.positional is not None:
            x = self.positional(x, *self.grid)
        return x

    def padding_mask(self, batch: Batch) -> Tensor:
        """``(B, N)``, all False: every image has all its pixels, hence all its patches."""
        return torch.zeros(
            batch.labels.shape[0], self.num_vectors, dtype=torch.bool, device=batch.labels.device
        )


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
    def from_config(cls, config: ModelConfig, *, max_len: int = 512) -> SequenceEncoder:
        raise ValueError(
            "architecture 'cnn2d' needs the image grid: build it with build_image_encoder"
        )

    @classmethod
    def for_grid(cls, config: ModelConfig, grid: tuple[int, int]) -> CNN2DEncoder:
        """The encoder ``config`` describes, for a ``rows × cols`` grid of vectors."""
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


#: Encoders that need the image grid, by ``model.architecture``.
IMAGE_ENCODERS: dict[str, type[CNN2DEncoder]] = {"cnn2d": CNN2DEncoder}


def uses_image(config: ModelConfig) -> bool:
    """Whether ``config`` asks for an image model (it needs an image recipe's grid)."""
    return (
        config.patch_size is not None
        or config.grid_positional is not None
        or config.architecture in IMAGE_ENCODERS
    )


def build_image_parts(
    config: ModelConfig, image_shape: ImageShape | None, *, task: str
) -> tuple[ImageEmbedding, SequenceEncoder | None]:
    """The image embedding ``config`` describes and, for ``cnn2d``, its encoder.

    Returns:
        ``(embedding, encoder)``; ``encoder`` is ``None`` for a sequence encoder, which
        :func:`~selfattn.models.encoders.build_encoder` builds as for any vectors.

    Raises:
        ValueError: no image grid (the data is not an image recipe), a token task, or an
            embedding error (see :class:`ImageEmbedding`).
    """
    if image_shape is None:
        raise ValueError(
            "model.patch_size, model.grid_positional and architecture 'cnn2d' need image "
            "data (digits, mnist-5k, fashion-mnist); this dataset has no image grid"
        )
    if task != "sequence":
        raise ValueError(f"image models classify whole images (task 'sequence'), not {task!r}")
    embedding = ImageEmbedding(
        image_shape,
        config.embed_dim,
        patch_size=config.patch_size,
        grid_positional=config.grid_positional,
    )
    encoder = None
    if config.architecture in IMAGE_ENCODERS:
        encoder = IMAGE_ENCODERS[config.architecture].for_grid(config, embedding.grid)
    return embedding, encoder
