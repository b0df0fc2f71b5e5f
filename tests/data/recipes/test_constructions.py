"""``wsj-constructions`` against the gold tags it is read from: the same lines and words
as ``pos-wsj``, each label present exactly when one of its tags is, the counts its
documentation gives, and its seq2seq form in the documented canonical order."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

from selfattn.data import load_dataset
from selfattn.data.readers.label_sets import decoded_set
from selfattn.data.recipes import Recipe
from selfattn.data.recipes.constructions import CONSTRUCTIONS
from selfattn.specials import NO_LABELS

#: What the recipe's docstring and README say.
PER_LABEL = {
    "past": 602,
    "number": 355,
    "possessive": 352,
    "gerund": 291,
    "wh-word": 205,
    "modal": 185,
    "comparative": 113,
    "superlative": 59,
}
SET_SIZES = {0: 89, 1: 231, 2: 303, 3: 231, 4: 109, 5: 32, 6: 6}


def test_labels_are_the_constructions_the_gold_tags_show(
    fetched: Callable[[str], Recipe],
) -> None:
    fetched("wsj-constructions")
    sets, tagged = load_dataset("wsj-constructions"), load_dataset("pos-wsj")
    assert sets.task == "multilabel" and sets.input == "text"
    for part in ("train", "dev", "test"):
        ours, theirs = getattr(sets, part), getattr(tagged, part)
        assert len(ours) == len(theirs)
        for example, gold in zip(ours, theirs, strict=True):
            assert example.tokens == gold.tokens
            tags = set(gold.label)
            expected = {label for label, shown in CONSTRUCTIONS.items() if tags & shown}
            assert set(example.label) == expected and len(example.label) == len(expected)
    examples = sets.train + sets.dev + sets.test
    assert Counter(label for e in examples for label in e.label) == PER_LABEL
    assert Counter(len(e.label) for e in examples) == SET_SIZES


def test_as_seq2seq_the_sets_are_written_by_training_frequency(
    fetched: Callable[[str], Recipe],
) -> None:
    fetched("wsj-constructions")
    sets = load_dataset("wsj-constructions")
    pairs = load_dataset("wsj-constructions", task="seq2seq")
    assert pairs.task == "seq2seq"
    counts = Counter(label for e in sets.train for label in e.label)
    order = sorted(counts, key=lambda label: (-counts[label], label))
    assert pairs.extra["label_order"].split() == order
    for part in ("train", "dev", "test"):
        for example, target in zip(getattr(sets, part), getattr(pairs, part), strict=True):
            assert decoded_set(target.label) == set(example.label)
            assert target.label == (tuple(sorted(example.label, key=order.index)) or (NO_LABELS,))
