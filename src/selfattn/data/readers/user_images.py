"""A user's picture read as an image recipe's training example (Pillow).

An image recipe's example is its ``(H·W, C)`` pixels on the recipe's grid, at its grey
levels, on its background (``digits``: 8 × 8 at 17 levels; MNIST: 28 × 28, white on
black); ``lra-image`` writes the same pixels as text tokens ``"0"`` … ``"255"``. At train
time :func:`image_format` records these from the training images; at predict time
:func:`image_description` checks the record and :func:`read_image` puts a PNG or JPEG of
any size, mode and background onto them.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from selfattn.data.readers.user_description import InputDescription
from selfattn.datatypes import DataError, Example
from selfattn.specials import NO_LABEL

#: The longest side read, in pixels (a phone's photo is 4032 × 3024), and the most the
#: long side may exceed the short one: padding to the grid's proportions makes an
#: ``(h, w)`` picture about ``max(h, w)²`` pixels, so both bound the memory spent on it.
MAX_SIDE = 4096
MAX_ASPECT = 16

# ----------------------------------------------------------------------- train time


def image_format(
    grid: tuple[int, int, int], pixels: list[np.ndarray], *, levels: int, pixel_tokens: bool = False
) -> dict[str, Any]:
    """The checkpoint's record of the training images: ``kind``, ``grid``, ``levels``,
    ``background`` and ``pixel_tokens``; the background is dark when the training images'
    borders are mostly below mid-grey.

    Args:
        grid: ``(H, W, C)``.
        pixels: training images, each ``(H·W, C)`` in [0, 1].
        levels: the grey levels (:func:`pixel_levels`).
        pixel_tokens: the images are text tokens (lra-image).
    """
    border = np.concatenate([_border(p.reshape(grid)) for p in pixels])
    background = "dark" if float(border.mean()) < 0.5 else "light"
    return {
        "kind": "image",
        "grid": list(grid),
        "levels": levels,
        "background": background,
        "pixel_tokens": pixel_tokens,
    }


def pixel_levels(features: list[np.ndarray]) -> int:
    """The fewest grey levels n making every training pixel a multiple of 1/n (else 255)."""
    values = np.unique(np.concatenate([f.ravel() for f in features])).astype(np.float64)
    for levels in range(1, 256):
        if np.abs(values * levels - np.rint(values * levels)).max() < 1e-3:
            return levels
    return 255


def _border(image: np.ndarray) -> np.ndarray:
    """The outermost pixels of an ``(H, W, C)`` image, flat."""
    return np.concatenate([image[0], image[-1], image[:, 0], image[:, -1]]).ravel()


# --------------------------------------------------------------------- predict time


def image_description(
    description: InputDescription, stored: dict[str, Any], spec_shape: tuple[int, int, int] | None
) -> InputDescription:
    """``description`` with the grid, levels and background of :func:`image_format`'s
    ``stored`` record.

    Raises:
        DataError: the record is malformed or its grid differs from the model's
            ``image_shape`` (``spec_shape``).
    """
    grid, levels = stored.get("grid"), stored.get("levels")
    background, tokens = stored.get("background"), stored.get("pixel_tokens")
    shape = None
    if isinstance(grid, list) and len(grid) == 3 and all(isinstance(n, int) for n in grid):
        shape = (grid[0], grid[1], grid[2]) if min(grid) > 0 and grid[2] in (1, 3) else None
    if shape is None:
        problem = f"grid {grid!r} is not [H, W, 1 or 3]"
    elif spec_shape is not None and tuple(spec_shape) != shape:
        problem = f"grid {grid} differs from the model's image_shape {list(spec_shape)}"
    elif not isinstance(levels, int) or not 1 <= levels <= 255:
        problem = f"levels {levels!r} is not 1-255"
    elif background not in ("dark", "light") or not isinstance(tokens, bool):
        problem = f"background {background!r} or pixel_tokens {tokens!r} is malformed"
    else:
        return replace(
            description, grid=shape, levels=levels, background=background, pixel_tokens=tokens
        )
    raise DataError(f"{description.dataset}: the checkpoint's image input format: {problem}")


def read_image(path: Path, description: InputDescription, source: str) -> Example:
    """Grey (or RGB) in [0, 1], inverted to the training background, padded to the grid's
    proportions, resized onto the grid and quantised to the training grey levels.

    Returns:
        An unlabelled example of ``features`` ``(H·W, C)`` float32, or of pixel ``tokens``
        for an lra-image model.

    Raises:
        DataError: a file Pillow cannot read, a damaged one, or one too large or too
            narrow (:func:`check_size`).
    """
    from PIL import Image, UnidentifiedImageError

    assert description.grid is not None
    height, width, channels = description.grid
    try:
        with Image.open(path) as image:
            check_size(path, *image.size)  # from the header, before any pixel is decoded
            image.load()
            pixels = _unit_pixels(image, channels)  # (h, w, C)
    except (UnidentifiedImageError, Image.DecompressionBombError) as err:
        raise DataError(f"{path}: not an image Pillow can read ({err})") from None
    except DataError:
        raise
    except (OSError, SyntaxError, ValueError) as err:  # truncated or damaged
        raise DataError(f"{path}: damaged image ({err})") from None
    if (float(_border(pixels).mean()) >= 0.5) != (description.background == "light"):
        pixels = 1.0 - pixels
    pixels = _pad_to_ratio(pixels, height / width, float(np.median(_border(pixels))))
    if pixels.shape[:2] != (height, width):
        # Shrinking, BOX averages what each grid pixel covers (as sklearn's 8 × 8 digits
        # count the ink of 4 × 4 blocks of a 32 × 32 bitmap); enlarging interpolates.
        shrink = pixels.shape[0] > height
        method = Image.Resampling.BOX if shrink else Image.Resampling.BILINEAR
        planes = [Image.fromarray(pixels[..., c].astype(np.float32)) for c in range(channels)]
        pixels = np.stack([np.asarray(p.resize((width, height), method)) for p in planes], -1)
    levels = np.rint(np.clip(pixels, 0.0, 1.0) * description.levels).reshape(-1, channels)
    if description.pixel_tokens:
        return Example(tuple(str(int(v)) for v in levels[:, 0]), None, NO_LABEL, source)
    # Training divides float32 grey levels by a float32 scale: the same bits here.
    return Example(
        None, levels.astype(np.float32) / np.float32(description.levels), NO_LABEL, source
    )


def check_size(path: Path, width: int, height: int) -> None:
    """Refuse a picture with a side over :data:`MAX_SIDE` or proportions past
    :data:`MAX_ASPECT`.

    Raises:
        DataError: ``photo.png: 100000 × 1 pixels; images are read up to …``.
    """
    long, short = max(width, height), min(width, height)
    if long > MAX_SIDE or short < 1 or long > MAX_ASPECT * short:
        raise DataError(
            f"{path}: {width} × {height} pixels; images are read up to {MAX_SIDE} pixels a "
            f"side and {MAX_ASPECT}:1 (shrink or crop it first)"
        )


def _unit_pixels(image: Any, channels: int) -> np.ndarray:
    """``(h, w, channels)`` float64 in [0, 1] from a Pillow image of any mode."""
    from PIL import Image

    if image.mode.startswith("I;16") or image.mode in ("I", "F"):  # 16-bit PNG, TIFF
        scale = 1.0 if image.mode == "F" else 65535.0
        pixels = np.asarray(image, dtype=np.float64) / scale
    else:
        if image.mode in ("RGBA", "LA", "PA") or "transparency" in image.info:
            rgba = image.convert("RGBA")  # transparent shows as white, as in a viewer
            image = Image.alpha_composite(Image.new("RGBA", rgba.size, "white"), rgba)
        pixels = np.asarray(image.convert("L" if channels == 1 else "RGB"), np.float64) / 255
    pixels = np.clip(pixels, 0.0, 1.0)
    return np.repeat(pixels[..., None], channels, axis=-1) if pixels.ndim == 2 else pixels


def _pad_to_ratio(pixels: np.ndarray, ratio: float, fill: float) -> np.ndarray:
    """``(h, w, C)`` padded evenly on two sides with ``fill`` to height / width ≈ ``ratio``,
    so that resizing keeps the picture's proportions."""
    h, w = pixels.shape[:2]
    extra_rows, extra_columns = max(0, round(ratio * w) - h), max(0, round(h / ratio) - w)
    pad = [
        (extra_rows // 2, extra_rows - extra_rows // 2),
        (extra_columns // 2, extra_columns - extra_columns // 2),
        (0, 0),
    ]
    return np.pad(pixels, pad, constant_values=fill)
