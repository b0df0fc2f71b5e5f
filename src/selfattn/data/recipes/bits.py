"""The neural Turing machine's copy and repeat-copy tasks (Graves et al. 2014, §4.1–4.2) as
recipes of the ``bits`` task: a vector in, a vector of bits out, at every step.

``copy``: a sequence of 1–10 random 8-bit vectors, then a delimiter; the model must then
write the sequence back with no input. ``repeat-copy``: the same, then the number of
repeats (1–10, given as repeats / 10), and the sequence is to be written that many times,
then an end marker. The layout is :func:`selfattn.data.copy_task.copy_batch`'s.

Each example's ``features`` are its ``(T, 10)`` input vectors (8 bits, the delimiter
channel, the repeat-count channel) and its ``label`` holds, per step, the 9 bits due there
(8 bits and the end marker) as a string of ``0`` and ``1``, or ``""`` where nothing is due.

The test splits hold longer sequences than training ever sees, the paper's question of
whether the learned algorithm generalises: copy at lengths 10, 20, 30, 40 and 50 (100
each); repeat copy at length 10 with 10, 15 and 20 repeats and at length 20 with 10.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path

import torch

from selfattn.data.copy_task import copy_batch
from selfattn.data.fetch.sources import GeneratedSource
from selfattn.data.registry import Recipe, register
from selfattn.datatypes import DatasetSplits, Example

BITS = 8
MAX_REPEATS = 10
TRAIN_LENGTHS = (1, 10)
SIZES = {"train": 20_000, "dev": 500}
#: (length, repeats) of the test split's groups, 100 examples each.
TESTS = {
    "copy": [(length, 0) for length in (10, 20, 30, 40, 50)],
    "repeat-copy": [(10, 10), (10, 15), (10, 20), (20, 10)],
}
TEST_GROUP = 100


def bits_examples(
    shapes: Sequence[tuple[int, int]], generator: torch.Generator, name: str
) -> list[Example]:
    """One example per ``(length, repeats)`` of ``shapes``, in order: a sequence of
    ``length`` random vectors to copy (``repeats`` 0) or to write ``repeats`` times.
    Sequences of one shape are drawn together."""
    at: dict[tuple[int, int], list[int]] = defaultdict(list)
    for index, shape in enumerate(shapes):
        at[shape].append(index)
    out: list[Example | None] = [None] * len(shapes)
    for (length, repeats), indices in sorted(at.items()):
        batch = copy_batch(
            len(indices),
            length,
            bits=BITS,
            repeats=repeats,
            max_repeats=MAX_REPEATS,
            generator=generator,
        )
        due = batch.mask[0].bool().tolist()  # the same steps in every sequence of a shape
        targets = batch.targets.int().numpy()
        inputs = batch.inputs.numpy()
        for row, index in enumerate(indices):
            label = tuple(
                "".join(map(str, step)) if is_due else ""
                for step, is_due in zip(targets[row].tolist(), due, strict=True)
            )
            out[index] = Example(None, inputs[row], label, f"{name}[{index}]")
    return [example for example in out if example is not None]


def _training_shapes(size: int, repeat: bool, generator: torch.Generator) -> list[tuple[int, int]]:
    low, high = TRAIN_LENGTHS
    lengths = torch.randint(low, high + 1, (size,), generator=generator).tolist()
    repeats = (
        torch.randint(1, MAX_REPEATS + 1, (size,), generator=generator).tolist()
        if repeat
        else [0] * size
    )
    return list(zip(lengths, repeats, strict=True))


def bits_builder(kind: str) -> Callable[[Recipe, list[Path]], DatasetSplits]:
    """The builder of recipe ``copy`` or ``repeat-copy``: each split from its own
    generator, seeded ``source seed · 10 + split number``."""

    def build(recipe: Recipe, paths: list[Path]) -> DatasetSplits:
        assert isinstance(recipe.source, GeneratedSource)
        splits = []
        for number, split in enumerate(("train", "dev", "test")):
            generator = torch.Generator().manual_seed(recipe.source.seed * 10 + number)
            if split == "test":
                shapes = [shape for shape in TESTS[kind] for _ in range(TEST_GROUP)]
            else:
                shapes = _training_shapes(SIZES[split], kind == "repeat-copy", generator)
            splits.append(bits_examples(shapes, generator, f"{recipe.name}/{split}"))
        return recipe.splits(*splits)

    return build


register(
    Recipe(
        name="copy",
        task="bits",
        input="vectors",
        description=(
            "The neural Turing machine's copy task (Graves et al. 2014): 1-10 random 8-bit "
            "vectors, a delimiter, then write them back. 20,000 train, 500 dev; test at "
            "lengths 10, 20, 30, 40, 50 (100 each: longer than trained)."
        ),
        source=GeneratedSource(seed=0),
        licence="generated data, no restrictions",
        build=bits_builder("copy"),
    ),
    Recipe(
        name="repeat-copy",
        task="bits",
        input="vectors",
        description=(
            "The neural Turing machine's repeat-copy task: 1-10 random 8-bit vectors, a "
            "delimiter, a repeat count of 1-10; write them that many times, then an end "
            "marker. 20,000 train, 500 dev; test at (length, repeats) (10, 10), (10, 15), "
            "(10, 20), (20, 10), 100 each."
        ),
        source=GeneratedSource(seed=0),
        licence="generated data, no restrictions",
        build=bits_builder("repeat-copy"),
    ),
)
