"""Fixed train / dev / test splits: every recipe's split is a pure function of its data.

A split never depends on the machine, the Python hash seed or the order files were
listed in, so "the test set of translate-de-en" means the same 1,000 pairs everywhere.
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Sequence
from typing import TypeVar

from selfattn.data.types import Example

T = TypeVar("T")


def split_by_position(items: Sequence[T], fractions: tuple[float, float]) -> tuple[list[T], ...]:
    """First ``fractions[0]`` → train, next ``fractions[1]`` → dev, the rest → test."""
    n_train = int(len(items) * fractions[0])
    n_dev = int(len(items) * fractions[1])
    return (
        list(items[:n_train]),
        list(items[n_train : n_train + n_dev]),
        list(items[n_train + n_dev :]),
    )


def split_by_count(
    items: Sequence[T], *, num_test: int, num_dev: int
) -> tuple[list[T], list[T], list[T]]:
    """``(train, dev, test)``: the first ``num_test`` items → test, the next ``num_dev`` → dev.

    Fixed-size held-out sets (rather than fractions) keep dev / test the same size when
    a filter rule changes and the corpus grows or shrinks a little.

    Raises:
        ValueError: fewer items than ``num_test + num_dev`` + one training item.
    """
    if len(items) <= num_test + num_dev:
        raise ValueError(
            f"{len(items)} items cannot hold {num_test} test + {num_dev} dev + any training"
        )
    test = list(items[:num_test])
    dev = list(items[num_test : num_test + num_dev])
    return list(items[num_test + num_dev :]), dev, test


def shuffled(items: Sequence[T], seed: int) -> list[T]:
    """A copy of ``items`` in an order fixed by ``seed`` (Python's ``random.Random``)."""
    order = list(items)
    random.Random(seed).shuffle(order)
    return order


def stratified_holdout(
    examples: Sequence[Example], fraction: float, seed: int
) -> tuple[list[Example], list[Example]]:
    """Hold out ``fraction`` of each label's examples (seeded); keep the data order."""
    by_label: dict[str, list[int]] = defaultdict(list)
    for i, example in enumerate(examples):
        by_label[str(example.label)].append(i)
    rng = random.Random(seed)
    held: set[int] = set()
    for label in sorted(by_label):
        indices = by_label[label]
        rng.shuffle(indices)
        held.update(indices[: round(len(indices) * fraction)])
    kept = [e for i, e in enumerate(examples) if i not in held]
    return kept, [e for i, e in enumerate(examples) if i in held]


def stratified_subset(
    examples: Sequence[Example], fraction: float, seed: int = 0, *, stratify: bool = True
) -> list[Example]:
    """About ``fraction`` of each label's examples, in data order; nested in ``fraction``.

    Each label's examples are shuffled once with ``seed`` and the first
    ``max(1, round(n · fraction))`` kept, so a smaller fraction's subset lies inside a
    larger one's (the lecture's data-size experiment grows one training set: 10 % ⊂ 30 %
    ⊂ 100 %) and every label keeps at least one example. ``stratify=False`` treats all
    examples as one group — for labels that are not classes (a token task's tag
    sequences, seq2seq targets, regression values).

    Raises:
        ValueError: ``fraction`` outside (0, 1].
    """
    if not 0.0 < fraction <= 1.0:
        raise ValueError(f"fraction must be in (0, 1], got {fraction}")
    if fraction == 1.0:
        return list(examples)
    by_label: dict[str, list[int]] = defaultdict(list)
    for i, example in enumerate(examples):
        by_label[str(example.label) if stratify else ""].append(i)
    rng = random.Random(seed)
    kept: set[int] = set()
    for label in sorted(by_label):
        indices = by_label[label]
        rng.shuffle(indices)
        kept.update(indices[: max(1, round(len(indices) * fraction))])
    return [e for i, e in enumerate(examples) if i in kept]
