"""Small data files the tests write and train on: tagged sentences, ``source<TAB>target``
pairs and ``.npz`` vector sets, each drawn from a seeded generator; ``edit_json``,
which changes fields of a JSON file (a checkpoint's config or manifest); and
``read_error``, the one-line refusal of a reader."""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import numpy as np
import pytest

from selfattn.data import DataError
from selfattn.data.readers.user_input import describe_input
from selfattn.data.recipes.graphs import ELEMENTS

#: Words by tag; "saw" is a verb and a noun, so that a tagger must read the context.
WORDS: dict[str, list[str]] = {
    "DT": ["the", "a"],
    "NN": ["saw", "dog", "cat"],
    "VBD": ["saw", "bit"],
    "PRP": ["I", "it"],
}
#: The tags of every written sentence, in order.
PATTERN = ("PRP", "VBD", "DT", "NN")


def write_tagged(
    path: Path, count: int, seed: int = 0, *, words: Mapping[str, Sequence[str]] = WORDS
) -> Path:
    """``count`` lines of ``word/TAG`` items, a word drawn from ``words`` for each tag of
    :data:`PATTERN`."""
    rng = random.Random(seed)
    lines = [" ".join(f"{rng.choice(words[t])}/{t}" for t in PATTERN) for _ in range(count)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def write_pairs(
    path: Path,
    count: int,
    seed: int = 0,
    *,
    symbols: Sequence[str] = "abcdef",
    longest: int = 5,
    reverse: bool = True,
) -> Path:
    """``count`` lines ``source<TAB>target``: 2 to ``longest`` of ``symbols``, and the same
    reversed (``reverse``) or as they are (a monotonic alignment)."""
    rng = random.Random(seed)
    lines = []
    for _ in range(count):
        source = [rng.choice(symbols) for _ in range(rng.randint(2, longest))]
        target = reversed(source) if reverse else source
        lines.append(" ".join(source) + "\t" + " ".join(target))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def write_vector_sets(path: Path, count: int = 30, seed: int = 0, *, largest: int = 9) -> Path:
    """An ``.npz`` of ``count`` sets of 2 to ``largest`` vectors of 3 features, labelled
    ``up`` or ``down`` by the sign of their mean."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(2, largest + 1, size=count)
    features = rng.normal(size=(int(lengths.sum()), 3)).astype(np.float32)
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    labels = np.array(
        [
            "up" if features[s : s + n].mean() > 0 else "down"
            for s, n in zip(starts, lengths, strict=True)
        ]
    )
    np.savez(path, features=features, lengths=lengths, labels=labels)
    return path


def write(path: Path, text: str, encoding: str = "utf-8") -> Path:
    """``text`` written to ``path`` in ``encoding``; the path."""
    path.write_bytes(text.encode(encoding))
    return path


def read_error(read: Callable[[Path], object], path: Path) -> str:
    """The message of the :class:`~selfattn.data.DataError` that ``read(path)`` raises,
    which must be one line."""
    with pytest.raises(DataError) as info:
        read(path)
    message = str(info.value)
    assert "\n" not in message, message
    return message


def edit_json(path: Path, **changes: object) -> None:
    """Set ``changes`` in the JSON object stored at ``path``."""
    data = json.loads(path.read_text(encoding="utf-8"))
    data.update(changes)
    path.write_text(json.dumps(data), encoding="utf-8")


#: What ``input_format`` stores for the speech recipes (40 mel bands, 3 frames stacked) and
#: a 28 × 28 image recipe.
SPEECH_STORED = {"kind": "speech", "sample_rate": 16000, "n_mels": 40, "stack": 3}
MNIST_STORED = {
    "kind": "image",
    "grid": [28, 28, 1],
    "levels": 255,
    "background": "dark",
    "pixel_tokens": False,
}
#: What a run of each input kind stores about its input, for ``read_input``: a speech
#: model's, an MNIST image model's, a molecule model's and a graph model's.
SPEECH_INPUT = describe_input("d", "vectors", feature_dim=120, stored=SPEECH_STORED)
IMAGE_INPUT = describe_input(
    "mnist-5k", "vectors", feature_dim=1, image_shape=(28, 28, 1), stored=MNIST_STORED
)
MOLECULE_INPUT = describe_input(
    "solubility",
    "vectors",
    stored={"kind": "molecule", "elements": list(ELEMENTS), "bond_orders": [1, 2, 3, 4]},
)
GRAPH_INPUT = describe_input("g", "vectors", feature_dim=2, stored={"kind": "graph"})
