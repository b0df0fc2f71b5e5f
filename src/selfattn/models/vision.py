"""Image models over an image recipe's pixel vectors (lecture 000, §Self-attention for
Image; §Self-attention v.s. CNN).

An image recipe (:mod:`selfattn.data.recipes.images`) gives each image as ``(H·W, C)`` pixel
vectors. :class:`ImageEmbedding` folds them back into the ``(C, H, W)`` grid and cuts it
into vectors again, one per pixel or one per P × P patch (ViT, Dosovitskiy et al. 2021),
adding a 2-D positional encoding of each vector's (row, column); any sequence encoder
then reads them. :class:`~selfattn.models.architectures.cnn2d.CNN2DEncoder` is the
lecture's comparison: a small 2-D CNN, a self-attention whose receptive field is fixed to a
neighbourhood — the better model with little data, self-attention's flexibility paying off
only with more.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch
from torch import Tensor, nn

from selfattn.datatypes import Batch
from selfattn.models.encoders import SequenceEncoder
from selfattn.models.registry import ARCHITECTURES
from selfattn.positional import GRID_POSITIONAL
from selfattn.positional.grid import GridPositional
from selfattn.vision import PatchEmbedding, PixelEmbedding, vectors_to_image

if TYPE_CHECKING:
    from selfattn.models.option_groups import EncoderOptions, ModelOptions

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


def uses_image(config: ModelOptions) -> bool:
    """Whether ``config`` asks for an image model (it needs an image recipe's grid)."""
    return (
        getattr(config, "patch_size", None) is not None
        or getattr(config, "grid_positional", None) is not None
        or grid_encoder(config.architecture) is not None
    )


def grid_encoder(architecture: str) -> Any:
    """The encoder class of ``architecture`` when it reads an image grid (its
    registration produces ``image_vectors``), else ``None``."""
    entry = ARCHITECTURES[architecture]
    return entry.encoder if "image_vectors" in entry.produces else None


def build_image_parts(
    config: EncoderOptions, image_shape: ImageShape | None, *, task: str
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
    grid_type = grid_encoder(config.architecture)
    encoder = None if grid_type is None else grid_type.for_grid(config, embedding.grid)
    return embedding, encoder
