"""Fixed train / dev / test splits: every recipe's split is a pure function of its data.

A split never depends on the machine, the Python hash seed or the order files were
listed in, so "the test set of translate-de-en" means the same 1,000 pairs everywhere.
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Sequence
from typing import TypeVar

from selfattn.datatypes import DatasetSplits, Example

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


def dev_holdout(
    examples: Sequence[Example], fraction: float, seed: int = 0, *, stratify: bool = True
) -> tuple[list[Example], list[Example]]:
    """``(train, dev)``: about ``fraction`` of ``examples`` held out as a dev set, seeded.

    ``round(N · fraction)`` examples are held out (at least one while ``fraction > 0``),
    both parts in data order. With ``stratify`` each label gives its share (largest
    remainders first) and keeps at least one example in train, so every label stays
    learnable; a label with one example is never held out. ``stratify=False`` treats all
    examples as one group (token tasks, seq2seq, regression). A set too small to spare
    any example gives an empty dev set. (:func:`stratified_holdout`, which the recipes'
    splits are made with, rounds per label and may empty a label from train; it stays as
    it is so that the recipes' splits, and the results measured on them, do not move.)

    Raises:
        ValueError: ``fraction`` outside [0, 1).
    """
    if not 0.0 <= fraction < 1.0:
        raise ValueError(f"fraction must be in [0, 1), got {fraction}")
    total = len(examples)
    wanted = 0 if fraction == 0.0 else max(1, round(total * fraction))
    groups: dict[str, list[int]] = defaultdict(list)
    for i, example in enumerate(examples):
        groups[str(example.label) if stratify else ""].append(i)
    shares = {label: wanted * len(indices) / total for label, indices in groups.items()}
    quota = {label: min(int(share), len(groups[label]) - 1) for label, share in shares.items()}
    by_remainder = sorted(groups, key=lambda label: (int(shares[label]) - shares[label], label))
    left = wanted - sum(quota.values())
    while left > 0:
        open_labels = [label for label in by_remainder if quota[label] < len(groups[label]) - 1]
        if not open_labels:
            break
        for label in open_labels[:left]:
            quota[label] += 1
        left = wanted - sum(quota.values())
    rng = random.Random(seed)
    held: set[int] = set()
    for label in sorted(groups):
        indices = list(groups[label])
        rng.shuffle(indices)
        held.update(indices[: quota[label]])
    kept = [e for i, e in enumerate(examples) if i not in held]
    return kept, [e for i, e in enumerate(examples) if i in held]


#: The seed of a user's held-out dev split: fixed, so the split is a pure function of the
#: file and ``data.dev_fraction`` (like a recipe's) and never moves with ``train.seed``.
DEV_SEED = 0

_NO_DEV = "training without dev evaluation; the best epoch is the one with the lowest training loss"


def dev_note(splits: DatasetSplits, *, dev_file: bool, fraction: float) -> str | None:
    """One line saying where a user's dev set came from, or that there is none.

    Args:
        splits: as loaded (before any ``train_fraction`` subset).
        dev_file: a dev file was given (or the data are a recipe's, with its own split).
        fraction: ``data.dev_fraction``.
    """
    if dev_file:
        return None
    if splits.dev_from_train and splits.dev:
        total = len(splits.train) + len(splits.dev)
        return (
            f"no data.dev: holding out {len(splits.dev)} of {total} training examples as dev "
            f"(data.dev_fraction = {fraction:g}, seed {DEV_SEED})"
        )
    if splits.dev_from_train:
        return (
            f"no data.dev, and {len(splits.train)} training examples are too few to hold out "
            f"a dev set (data.dev_fraction = {fraction:g}): {_NO_DEV}"
        )
    return f"no data.dev and data.dev_fraction = 0: {_NO_DEV}"
