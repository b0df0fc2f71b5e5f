"""A user's input is bounded before memory is spent on it, and samples that are not
finite numbers are refused: each refusal one line naming the file and the limit."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from PIL import Image

from selfattn.data import DataError
from selfattn.data.readers import user_images
from selfattn.data.readers.user_input import InputDescription, describe_input, read_input
from selfattn.data.recipes.graphs import ELEMENTS

SPEECH = describe_input(
    "d",
    "vectors",
    feature_dim=120,
    stored={"kind": "speech", "sample_rate": 16000, "n_mels": 40, "stack": 3},
)
IMAGE = describe_input(
    "mnist-5k",
    "vectors",
    feature_dim=1,
    image_shape=(28, 28, 1),
    stored={
        "kind": "image",
        "grid": [28, 28, 1],
        "levels": 255,
        "background": "dark",
        "pixel_tokens": False,
    },
)
MOLECULE = describe_input(
    "solubility",
    "vectors",
    stored={"kind": "molecule", "elements": list(ELEMENTS), "bond_orders": [1, 2, 3, 4]},
)
GRAPH = describe_input("g", "vectors", feature_dim=2, stored={"kind": "graph"})


def refused(argument: str, description: InputDescription, starts: str, *words: str) -> str:
    """The one-line refusal of ``argument``, which starts with ``starts`` and holds
    ``words``, within two seconds."""
    start = time.perf_counter()
    with pytest.raises(DataError) as caught:
        read_input(argument, description)
    assert time.perf_counter() - start < 2.0
    message = str(caught.value)
    assert "\n" not in message and message.startswith(starts), message
    assert all(word in message for word in words), message
    return message


# ------------------------------------------------------------------------- images


@pytest.mark.parametrize("size", [(100_000, 1), (1, 100_000), (5000, 4000), (170, 10)])
def test_an_image_too_large_or_too_narrow_is_refused_from_its_header(
    size: tuple[int, int], tmp_path: Path
) -> None:
    """A 1 × 100,000 PNG is 177 bytes; padded to a square grid's proportions it was a
    74.5 GiB array."""
    path = tmp_path / "strip.png"
    Image.new("L", size).save(path)
    width, height = size
    refused(
        str(path),
        IMAGE,
        f"{path}: {width} × {height} pixels",
        f"{user_images.MAX_SIDE} pixels a side and {user_images.MAX_ASPECT}:1",
    )


def test_an_image_at_the_bounds_is_read(tmp_path: Path) -> None:
    path = tmp_path / "wide.png"
    Image.new("L", (user_images.MAX_ASPECT * 8, 8), 255).save(path)
    example = read_input(str(path), IMAGE)
    assert example.features is not None and example.features.shape == (28 * 28, 1)
