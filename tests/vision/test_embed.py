"""Pixels and ViT patches as vector sets: shapes, order, the conv = flatten+linear identity."""

from __future__ import annotations

import pytest
import torch

from selfattn.vision import PatchEmbedding, PixelEmbedding, image_to_vectors, vectors_to_image


def test_pixels_are_vectors_in_row_major_order() -> None:
    # The lecture's picture: 5×10 pixels of 3 channels = a set of 50 three-dim vectors.
    image = torch.randn(2, 3, 5, 10)
    embed = PixelEmbedding(3, 8)
    out = embed(image)
    assert out.shape == (2, 50, 8)
    assert embed.grid_shape(5, 10) == (5, 10)
    row, col = 3, 7
    expected = embed.proj(image[:, :, row, col])  # a linear map of that pixel's 3 values
    torch.testing.assert_close(out[:, row * 10 + col], expected)


def test_image_vector_round_trip() -> None:
    image = torch.randn(2, 4, 3, 5)
    vectors = image_to_vectors(image)
    assert vectors.shape == (2, 15, 4)
    torch.testing.assert_close(vectors_to_image(vectors, 3, 5), image)


def test_patch_shapes_and_cls_token() -> None:
    image = torch.randn(2, 3, 32, 48)
    plain = PatchEmbedding(3, 12, patch_size=16)
    assert plain(image).shape == (2, 2 * 3, 12)
    assert plain.grid_shape(32, 48) == (2, 3)
    assert not plain.has_cls

    with_cls = PatchEmbedding(3, 12, patch_size=16, cls_token=True)
    out = with_cls(image)
    assert with_cls.has_cls and out.shape == (2, 1 + 6, 12)
    assert with_cls.cls_token is not None
    torch.testing.assert_close(out[:, 0], with_cls.cls_token[0].expand(2, -1))


@pytest.mark.parametrize("patch_size", [4, (2, 3)])
def test_strided_conv_equals_flatten_then_linear(patch_size: int | tuple[int, int]) -> None:
    """ViT §3.1 flattens each patch to C·P·P numbers and applies one matrix."""
    torch.manual_seed(1)
    batch, channels, height, width, dim = 2, 3, 8, 12, 5
    embed = PatchEmbedding(channels, dim, patch_size).double()
    image = torch.randn(batch, channels, height, width, dtype=torch.float64)
    ph, pw = embed.patch_size
    rows, cols = height // ph, width // pw
    patches = (
        image.reshape(batch, channels, rows, ph, cols, pw)
        .permute(0, 2, 4, 1, 3, 5)  # (B, rows, cols, C, P_h, P_w): one patch per (row, col)
        .reshape(batch, rows * cols, channels * ph * pw)
    )
    assert embed.proj.bias is not None
    linear = patches @ embed.proj.weight.reshape(dim, -1).T + embed.proj.bias
    torch.testing.assert_close(embed(image), linear, rtol=0, atol=1e-12)


@pytest.mark.parametrize(
    ("shape", "error", "message"),
    [
        ((2, 3, 30, 32), ValueError, "30×32 image does not divide into 16×16"),
        ((2, 3, 32, 20), ValueError, "does not divide"),
        ((2, 1, 32, 32), ValueError, "expects 3 channels, got 1"),
        ((3, 32, 32), ValueError, r"expects images \(B, C, H, W\)"),
    ],
)
def test_patch_errors(shape: tuple[int, ...], error: type[Exception], message: str) -> None:
    with pytest.raises(error, match=message):
        PatchEmbedding(3, 8, 16)(torch.randn(shape))


def test_grid_shape_refuses_indivisible_sizes() -> None:
    with pytest.raises(ValueError, match="multiple of the patch size"):
        PatchEmbedding(3, 8, 4).grid_shape(10, 8)


def test_integer_images_are_refused() -> None:
    with pytest.raises(TypeError, match="floating-point"):
        PixelEmbedding(3, 8)(torch.zeros(1, 3, 2, 2, dtype=torch.uint8))
    with pytest.raises(ValueError, match="expects 3 channels"):
        PixelEmbedding(3, 8)(torch.zeros(1, 4, 2, 2))
