"""Fixed splits: by position, by count, stratified hold-outs and subsets, and the dev
set held out of a user's training file."""

from __future__ import annotations

from collections import Counter

import pytest

from selfattn.data import Example
from selfattn.data.batching.splits import (
    dev_holdout,
    shuffled,
    split_by_count,
    split_by_position,
    stratified_holdout,
    stratified_subset,
)


def test_split_helpers_are_fixed() -> None:
    train, dev, test = split_by_position(list(range(1001)), (0.8, 0.1))
    assert (len(train), len(dev), len(test)) == (800, 100, 101) and dev[0] == 800
    assert shuffled(range(10), seed=0) == shuffled(range(10), seed=0) != list(range(10))

    examples = [Example(None, None, str(i % 3), f"x:{i}") for i in range(30)]
    kept, held = stratified_holdout(examples, 0.1, seed=0)
    assert Counter(e.label for e in held) == {"0": 1, "1": 1, "2": 1}
    assert len(kept) == 27 and not {e.source for e in kept} & {e.source for e in held}

    train, dev, test = split_by_count(list(range(10)), num_test=3, num_dev=2)
    assert (test, dev, train) == ([0, 1, 2], [3, 4], [5, 6, 7, 8, 9])
    with pytest.raises(ValueError, match="cannot hold"):
        split_by_count(list(range(5)), num_test=3, num_dev=2)


def test_stratified_subset_is_nested_and_keeps_label_shares() -> None:
    examples = [Example(None, None, "a" if i % 4 else "b", f"x:{i}") for i in range(200)]
    small, mid = stratified_subset(examples, 0.1), stratified_subset(examples, 0.3)
    assert Counter(e.label for e in small) == {"a": 15, "b": 5}
    assert Counter(e.label for e in mid) == {"a": 45, "b": 15}
    assert {e.source for e in small} < {e.source for e in mid}  # 10 % ⊂ 30 %
    assert [e.source for e in small] == sorted((e.source for e in small), key=lambda s: int(s[2:]))
    assert stratified_subset(examples, 1.0) == examples
    assert len(stratified_subset(examples[:3], 0.01)) == 2  # each label keeps one
    tagged = [Example(("w",), None, (f"t{i}",), f"x:{i}") for i in range(50)]  # unique labels
    assert len(stratified_subset(tagged, 0.2, stratify=False)) == 10
    with pytest.raises(ValueError, match="fraction must be in"):
        stratified_subset(examples, 0.0)


def labelled(labels: str) -> list[Example]:
    return [Example((f"w{i}",), None, label, f"f.csv:{i + 1}") for i, label in enumerate(labels)]


def test_dev_holdout_is_seeded_stratified_and_keeps_every_label() -> None:
    examples = labelled("a" * 60 + "b" * 30 + "c" * 10 + "d")
    train, dev = dev_holdout(examples, 0.1, seed=0)
    assert len(dev) == 10 and len(train) == 91
    counts = {label: sum(e.label == label for e in dev) for label in "abcd"}
    assert counts == {"a": 6, "b": 3, "c": 1, "d": 0}  # each label its share; d has one
    assert {e.label for e in train} == set("abcd")
    assert [e.source for e in train + dev] != [e.source for e in examples]  # drawn, not cut
    assert sorted(e.source for e in train + dev) == sorted(e.source for e in examples)
    assert dev_holdout(examples, 0.1, seed=0) == (train, dev)  # a pure function
    assert dev_holdout(examples, 0.1, seed=1)[1] != dev
    assert dev == sorted(dev, key=examples.index)  # file order kept


def test_dev_holdout_small_and_unstratified() -> None:
    tiny = labelled("ab")
    assert dev_holdout(tiny, 0.1) == (tiny, [])  # no label can spare an example
    train, dev = dev_holdout(tiny, 0.1, stratify=False)
    assert len(train) == 1 and len(dev) == 1
    assert dev_holdout(labelled("a"), 0.5, stratify=False) == (labelled("a"), [])
    assert dev_holdout(labelled("aabb"), 0.0) == (labelled("aabb"), [])
    with pytest.raises(ValueError, match=r"\[0, 1\)"):
        dev_holdout(tiny, 1.0)
