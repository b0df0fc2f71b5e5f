"""Recipes: the registry's entries (fast) and the real corpora (slow, fetched from PyPI).

The split helpers the recipes use are tested in ``batching/test_splits.py``."""

from __future__ import annotations

import shutil
from collections import Counter
from pathlib import Path

import pytest

from selfattn.data import (
    RECIPES,
    DataError,
    DebianSource,
    GeneratedSource,
    LabelVocabulary,
    PyPISource,
    load_dataset,
)
from selfattn.data.fetch import cache
from selfattn.data.fetch.sources import InstalledSource


def test_registry_entries_are_complete() -> None:
    assert set(RECIPES) == {
        "pos-wsj",
        "wsj-constructions",
        "sentiment-rt",
        "speaker-jv",
        "translate-de-en",
        "translate-en-zh",
        "translate-en-zh-words",
        "bible-en-es",
        "convex-hull-5",
        "convex-hull-10",
        "convex-hull-20",
        "lra-listops",
        "listops-short",
        "lra-text",
        "lra-image",
        "digits",
        "mnist-5k",
        "fashion-mnist",
        "digits-espeak",
        "digit-strings-espeak",
        "phones-espeak",
        "solubility",
        "solubility-logs",
        "karate",
        *(f"qa{task}{version}" for task in (1, 2, 3) for version in ("", "-10k")),
        "copy",
        "repeat-copy",
    }
    for name, recipe in RECIPES.items():
        assert recipe.name == name and recipe.description and recipe.licence
        source = recipe.source
        if isinstance(source, PyPISource):
            assert len(source.sha256) == 64 and source.members
        elif isinstance(source, DebianSource):
            assert source.packages and source.origin().startswith("Debian ")
            for package in source.packages:
                assert len(package.sha256) == 64 and package.members
                assert all(not m.startswith("/") for m in package.members)
        elif isinstance(source, InstalledSource):  # files of a package selfattn depends on
            assert source.members and source.is_fetched()
        else:
            assert isinstance(source, GeneratedSource) and source.is_fetched()
        assert source.download_mb >= 0 and source.origin()
    seq2seq = {name for name, recipe in RECIPES.items() if recipe.task == "seq2seq"}
    hulls = {f"convex-hull-{n}" for n in (5, 10, 20)}
    translations = {"translate-de-en", "translate-en-zh", "translate-en-zh-words", "bible-en-es"}
    assert seq2seq == translations | {"digit-strings-espeak"} | hulls


def test_recipe_task_must_agree() -> None:
    with pytest.raises(DataError, match="'pos-wsj' is a token task, not seq2seq"):
        load_dataset("pos-wsj", task="seq2seq")
    with pytest.raises(DataError, match="unknown task 'seq3seq'"):
        load_dataset("pos-wsj", task="seq3seq")  # type: ignore[arg-type]


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


@pytest.mark.slow
def test_translate_de_en() -> None:
    recipe = RECIPES["translate-de-en"]
    splits = load_dataset("translate-de-en")
    assert recipe.is_fetched()
    assert splits.task == "seq2seq" and splits.input == "text"
    assert splits.extra["source"] == "Debian trans-de-en=1.9-6"
    assert (len(splits.train), len(splits.dev), len(splits.test)) == (15_326, 1_000, 1_000)
    examples = splits.train + splits.dev + splits.test
    pairs = {(e.tokens, e.label) for e in examples}
    assert len(pairs) == len(examples)  # no exact duplicates
    for e in examples:
        assert e.tokens is not None and isinstance(e.label, tuple)
        assert 3 <= len(e.tokens) <= 40 and 3 <= len(e.label) <= 40
        assert e.tokens[-1] in {".", "!", "?"} and e.label[-1] in {".", "!", "?"}
        assert not {"{", "}", "[", "]", "/", "…"} & (set(e.tokens) | set(e.label))
    # A pair from the dictionary's "Raunen" entry, annotations gone.
    murmur = ("Ein", "Raunen", "ging", "durch", "die", "Menge", ".")
    assert any(e.tokens == murmur and e.label[1] == "murmur" for e in examples)


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("apt-get") is None, reason="needs apt-get (Debian / Ubuntu)")
def test_real_debian_fetch_matches_the_pinned_checksum(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(cache.CACHE_ENV, str(tmp_path))  # a fresh cache: really download
    (package,) = RECIPES["translate-de-en"].source.packages  # type: ignore[union-attr]
    (path,) = package.fetch()
    assert path.is_relative_to(tmp_path) and path.stat().st_size == 25_611_714
    assert path.read_text(encoding="utf-8").startswith("# Version :: devel 2023-01-30")
    assert [p.name for p in tmp_path.rglob("*.deb")] == ["trans-de-en_1.9-6_all.deb"]


@pytest.mark.slow
def test_bible_en_es() -> None:
    splits = load_dataset("bible-en-es", task="seq2seq")
    assert RECIPES["bible-en-es"].is_fetched()
    assert (len(splits.train), len(splits.dev), len(splits.test)) == (28_579, 1_000, 1_000)
    examples = {e.source: e for e in splits.train + splits.dev + splits.test}
    genesis = examples["Gen 1:1"]
    assert genesis.tokens is not None
    assert " ".join(genesis.tokens).startswith("In the beginning , God created the heavens")
    assert " ".join(genesis.label).startswith("EN el principio crió Dios los cielos")
    # The two chapters numbered differently in NRSVA and KJV are left out.
    assert "Rev 22:21" in examples and "Rev 11:1" in examples
    assert not any(s.startswith(("3John 1:", "Rev 12:")) for s in examples)
    assert all(0 < len(e) <= 64 and 0 < len(e.label) <= 64 for e in examples.values())
    markup = [e.source for e in examples.values() if "<" in e.tokens or ">" in e.label]
    assert markup == []
