"""An image as a vector set (lecture 000, §Self-attention for Image).

The lecture's 5×10 RGB picture is a 5×10×3 tensor, i.e. a set of 50 three-dimensional
vectors, one per pixel, which self-attention can take like any other vector set. Two ways
to cut an image ``(B, C, H, W)`` into vectors ``(B, L, E)``, both row-major (vector
index = row · cols + col, the order :mod:`selfattn.positional.grid` encodes):

* :class:`PixelEmbedding` — one vector per pixel, a linear map of its C values
  (L = H·W; attention then costs O((H·W)²), fine for small images).
* :class:`PatchEmbedding` — one vector per non-overlapping P×P patch, "An Image is Worth
  16x16 Words" (ViT, Dosovitskiy et al. 2021): L = (H/P)(W/P), optionally with a learned
  class token in front.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn


def check_image(image: Tensor, in_channels: int, who: str) -> None:
    """One-line errors for anything but a float ``(B, in_channels, H, W)`` batch."""
    if image.dim() != 4:
        raise ValueError(f"{who} expects images (B, C, H, W), got shape {tuple(image.shape)}")
    if image.shape[1] != in_channels:
        raise ValueError(
            f"{who} expects {in_channels} channels, got {image.shape[1]} "
            f"(shape {tuple(image.shape)}; images are channels-first)"
        )
    if not image.is_floating_point():
        raise TypeError(f"{who} expects a floating-point image, got {image.dtype}")


def image_to_vectors(image: Tensor) -> Tensor:
    """``(B, C, H, W)`` → ``(B, H·W, C)``: each pixel's channels as one vector, row-major."""
    return image.flatten(2).transpose(1, 2)


def vectors_to_image(vectors: Tensor, rows: int, cols: int) -> Tensor:
    """``(B, rows·cols, C)`` → ``(B, C, rows, cols)``, the inverse of :func:`image_to_vectors`."""
    return vectors.transpose(1, 2).unflatten(2, (rows, cols))


class PixelEmbedding(nn.Module):
    """Every pixel becomes one vector: ``e = W x_pixel + b``.

    Args:
        in_channels: C (3 for RGB).
        embed_dim: E.
        bias: learn ``b``.
    """

    def __init__(self, in_channels: int, embed_dim: int, bias: bool = True) -> None:
        super().__init__()
        self.in_channels, self.embed_dim = in_channels, embed_dim
        self.proj = nn.Linear(in_channels, embed_dim, bias=bias)

    def grid_shape(self, height: int, width: int) -> tuple[int, int]:
        """The ``(rows, cols)`` grid an ``height × width`` image becomes: the image itself."""
        return height, width

    def forward(self, image: Tensor) -> Tensor:
        """Args:
            image: ``(B, C, H, W)``.

        Returns:
            ``(B, H·W, E)``, row-major; the grid is :meth:`grid_shape` ``(H, W)``.
        """
        check_image(image, self.in_channels, type(self).__name__)
        return self.proj(image_to_vectors(image))


class PatchEmbedding(nn.Module):
    """Non-overlapping P×P patches, each flattened and linearly projected (ViT).

    ViT (Dosovitskiy et al. 2021, §3.1) flattens each patch to a ``C·P·P`` vector and
    multiplies by E×(C·P·P) matrix; a Conv2d with kernel P and stride P computes exactly
    that (its weight ``(E, C, P, P)`` flattened is the matrix), without materialising the
    patches.

    Args:
        in_channels: C.
        embed_dim: E.
        patch_size: P, or ``(P_h, P_w)``; 16 in the paper's title.
        cls_token: prepend a learned vector whose final state summarises the image (the
            classification token of ViT, after BERT's [CLS]).
        bias: learn the projection's bias.
    """

    def __init__(
        self,
        in_channels: int,
        embed_dim: int,
        patch_size: int | tuple[int, int] = 16,
        *,
        cls_token: bool = False,
        bias: bool = True,
    ) -> None:
        super().__init__()
        patch = (patch_size, patch_size) if isinstance(patch_size, int) else tuple(patch_size)
        if len(patch) != 2 or min(patch) <= 0:
            raise ValueError(f"patch_size must be a positive int or pair, got {patch_size!r}")
        self.in_channels, self.embed_dim = in_channels, embed_dim
        self.patch_size: tuple[int, int] = (patch[0], patch[1])
        self.proj = nn.Conv2d(
            in_channels, embed_dim, kernel_size=self.patch_size, stride=self.patch_size, bias=bias
        )
        # timm's initialiser for ViT's class token (the paper leaves it unspecified).
        self.cls_token = nn.Parameter(0.02 * torch.randn(1, 1, embed_dim)) if cls_token else None

    @property
    def has_cls(self) -> bool:
        """True when a class token is prepended (pass on to the grid positional encoding)."""
        return self.cls_token is not None

    def grid_shape(self, height: int, width: int) -> tuple[int, int]:
        """The ``(rows, cols)`` of patches an ``height × width`` image is cut into.

        Raises:
            ValueError: a side is not a multiple of the patch size.
        """
        ph, pw = self.patch_size
        if height % ph or width % pw:
            raise ValueError(
                f"PatchEmbedding: a {height}×{width} image does not divide into {ph}×{pw} "
                "patches (resize or crop it to a multiple of the patch size)"
            )
        return height // ph, width // pw

    def forward(self, image: Tensor) -> Tensor:
        """Args:
            image: ``(B, C, H, W)`` with H, W multiples of the patch size.

        Returns:
            ``(B, N, E)`` with N = (H/P_h)(W/P_w), row-major over the patch grid
            (:meth:`grid_shape`), or ``(B, 1 + N, E)`` with the class token first.
        """
        check_image(image, self.in_channels, type(self).__name__)
        self.grid_shape(image.shape[-2], image.shape[-1])
        patches = image_to_vectors(self.proj(image))  # (B, E, rows, cols) → (B, N, E)
        if self.cls_token is None:
            return patches
        cls = self.cls_token.to(patches.dtype).expand(patches.shape[0], -1, -1)
        return torch.cat([cls, patches], dim=1)

    def extra_repr(self) -> str:
        return f"cls_token={self.has_cls}"
