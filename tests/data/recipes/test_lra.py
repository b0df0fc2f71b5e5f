"""Long Range Arena recipes: the ListOps evaluator and generator, text documents, images."""

from __future__ import annotations

import dataclasses
import gzip
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from selfattn.data import RECIPES, DataError, GeneratedSource, Recipe, load_dataset
from selfattn.data.recipes.listops import (
    END,
    LRA_LISTOPS,
    OPERATORS,
    SHORT_LISTOPS,
    ListOpsSpec,
    apply_operator,
    evaluate_listops,
    generate_listops,
)
from selfattn.data.recipes.lra import (
    FASHION_MNIST_CLASSES,
    PIXEL_TOKENS,
    disjoint_snippets,
    listops_builder,
    lra_image_builder,
    read_idx,
    snippet_documents,
)
from selfattn.data.recipes.reviews import Review, rotten_tomatoes_splits

LRA_RECIPES = ("lra-listops", "listops-short", "lra-text", "lra-image")


# ------------------------------------------------------------------------------- ListOps


@pytest.mark.parametrize(
    ("expression", "value"),
    [
        ("7", 7),
        ("[MAX 4 3 [MIN 2 3 ] 1 0 [MED 1 5 8 9 2 ] ]", 5),
        ("[MIN 4 3 [MAX 2 9 ] ]", 3),
        ("[SM 5 6 7 ]", 8),  # 18 mod 10
        ("[SM [MAX 1 [MIN 9 8 ] ] [MED 2 2 ] 9 ]", 9),  # 8 + 2 + 9 = 19
        ("[MED 3 1 2 ]", 2),
        # An even count: LRA's int(np.median(...)) floors the mean of the middle two.
        ("[MED 1 4 ]", 2),
        ("[MED 9 8 ]", 8),
        ("[MED 3 1 2 8 ]", 2),
        ("[MED 0 9 9 0 ]", 4),
    ],
)
def test_evaluator_on_hand_written_expressions(expression: str, value: int) -> None:
    assert evaluate_listops(expression.split()) == value


def test_operators_match_lra_numpy_definitions() -> None:
    rng = np.random.default_rng(0)
    for _ in range(500):
        args = [int(a) for a in rng.integers(0, 10, size=int(rng.integers(2, 11)))]
        assert apply_operator("[MED", args) == int(np.median(args))
        assert apply_operator("[SM", args) == int(np.sum(args) % 10)
        assert apply_operator("[MIN", args) == min(args)
        assert apply_operator("[MAX", args) == max(args)


@pytest.mark.parametrize(
    "expression", ["", "]", "[MAX ]", "[MAX 1", "1 2", "[MAX 1 ] 2", "[FOO 1 ]", "[MAX 10 ]"]
)
def test_evaluator_rejects_malformed_expressions(expression: str) -> None:
    with pytest.raises(ValueError):
        evaluate_listops(expression.split())


def nesting(tokens: tuple[str, ...]) -> tuple[int, list[int]]:
    """The deepest bracket nesting and every operator's argument count."""
    depth = deepest = 0
    counts: list[list[int]] = []
    finished = []
    for token in tokens:
        if counts and token != END:
            counts[-1][0] += 1
        if token in OPERATORS:
            depth += 1
            deepest = max(deepest, depth)
            counts.append([0])
        elif token == END:
            depth -= 1
            finished.append(counts.pop()[0])
    return deepest, finished


@pytest.mark.parametrize("spec", [SHORT_LISTOPS, LRA_LISTOPS], ids=["short", "lra"])
def test_generated_expressions_follow_the_spec(spec: ListOpsSpec) -> None:
    examples = generate_listops(spec, 40, seed=3)
    assert len({e.tokens for e in examples}) == 40
    for example in examples:
        assert example.tokens is not None
        assert spec.min_length <= len(example) <= spec.max_length
        # The label was computed while drawing; re-parsing the tokens must agree.
        assert example.label == str(evaluate_listops(example.tokens))
        deepest, arg_counts = nesting(example.tokens)
        assert 1 <= deepest <= spec.max_depth - 1
        assert all(2 <= count <= spec.max_args for count in arg_counts)
    assert examples[0].source == "listops[0]"
    assert (LRA_LISTOPS.min_length, LRA_LISTOPS.max_length) == (501, 1999)  # 500 < L < 2000


def test_generation_is_deterministic_and_seed_dependent() -> None:
    first = generate_listops(SHORT_LISTOPS, 30, seed="a")
    again = generate_listops(SHORT_LISTOPS, 30, seed="a")
    other = generate_listops(SHORT_LISTOPS, 30, seed="b")
    assert [(e.tokens, e.label) for e in first] == [(e.tokens, e.label) for e in again]
    assert first[0].tokens != other[0].tokens


def test_impossible_spec_fails_instead_of_looping(monkeypatch: pytest.MonkeyPatch) -> None:
    from selfattn.data.recipes import listops

    monkeypatch.setattr(listops, "MAX_MISSES", 1_000)
    only_digits = dataclasses.replace(SHORT_LISTOPS, min_length=1, max_length=1)
    with pytest.raises(ValueError, match="no new expression"):
        generate_listops(only_digits, 11, seed=0)  # there are only 10 one-token ones
    with pytest.raises(ValueError, match="min_length"):
        dataclasses.replace(SHORT_LISTOPS, min_length=300)


def test_listops_recipe_splits() -> None:
    recipe = RECIPES["listops-short"]
    assert (recipe.task, recipe.input) == ("sequence", "text")
    assert isinstance(recipe.source, GeneratedSource) and recipe.is_fetched()
    assert SHORT_LISTOPS.sizes == LRA_LISTOPS.sizes == (20_000, 1_000, 1_000)

    small = dataclasses.replace(SHORT_LISTOPS, sizes=(300, 50, 60))
    splits = dataclasses.replace(recipe, build=listops_builder(small)).load()
    assert (len(splits.train), len(splits.dev), len(splits.test)) == (300, 50, 60)
    parts = [{e.tokens for e in part} for part in (splits.train, splits.dev, splits.test)]
    assert sum(map(len, parts)) == len(set.union(*parts)) == 410  # distinct, disjoint
    assert splits.test[0].source == "listops-short/test[0]"
    assert set(Counter(e.label for e in splits.train)) <= {str(d) for d in range(10)}
    # Test is drawn first: it does not change with the size of train.
    bigger = dataclasses.replace(small, sizes=(400, 50, 60))
    again = dataclasses.replace(recipe, build=listops_builder(bigger)).load()
    assert [e.tokens for e in again.test] == [e.tokens for e in splits.test]


# ---------------------------------------------------------------------------------- text


def reviews(prefix: str, count: int) -> list[Review]:
    """Fake snippets without spaces, so a document splits back into them."""
    return [
        Review(f"{prefix}{label[0]}{i:03d}", label, f"fake:{i}")
        for i in range(count)
        for label in ("fresh", "rotten")
    ]


def test_disjoint_snippets_drops_texts_seen_in_an_earlier_split() -> None:
    train = [Review("good", "fresh", "a:1"), Review("bad", "rotten", "a:2")]
    dev = [Review("good", "fresh", "a:3"), Review("fine", "fresh", "a:4")]
    test = [Review("fine", "fresh", "a:5"), Review("bad", "rotten", "a:6"), train[0]]
    kept = disjoint_snippets([train, dev, test])
    assert [[r.source for r in part] for part in kept] == [["a:1", "a:2"], ["a:4"], []]


def test_documents_glue_snippets_of_their_own_label() -> None:
    pool = reviews("x", 30)
    texts = {r.text: r.label for r in pool}
    docs = snippet_documents(pool, 21, seed=1, lengths=(50, 90), name="t")
    assert Counter(d.label for d in docs) == {"fresh": 11, "rotten": 10}
    for doc in docs:
        assert doc.tokens is not None and all(len(t) == 1 for t in doc.tokens)
        assert 50 <= len(doc) <= 90
        *whole, last = "".join(doc.tokens).split(" ")
        assert all(texts[piece] == doc.label for piece in whole)
        assert any(t.startswith(last) and texts[t] == doc.label for t in texts)  # cut
    again = snippet_documents(pool, 21, seed=1, lengths=(50, 90), name="t")
    assert [d.tokens for d in again] == [d.tokens for d in docs]
    assert docs[3].source == "t[3]"
    with pytest.raises(DataError, match="both labels"):
        snippet_documents([r for r in pool if r.label == "fresh"], 2, seed=0)


def test_lra_text_recipe_on_the_real_snippets(fetched: Callable[[str], Recipe]) -> None:
    recipe = fetched("lra-text")
    splits = load_dataset("lra-text")
    assert (splits.task, splits.input) == ("sequence", "text")
    assert (len(splits.train), len(splits.dev), len(splits.test)) == (5_000, 1_000, 1_000)
    pools = disjoint_snippets(rotten_tomatoes_splits(recipe.fetch()[0]))
    texts = [{r.text for r in pool} for pool in pools]
    assert not (texts[0] & texts[1] or texts[0] & texts[2] or texts[1] & texts[2])
    for number, part in enumerate((splits.train, splits.dev, splits.test)):
        assert Counter(e.label for e in part) == {"fresh": len(part) // 2, "rotten": len(part) // 2}
        assert all(1_000 <= len(e) <= 4_000 for e in part)
        own = {r.text: r.label for r in pools[number]}
        for doc in part[:40]:  # the first snippet belongs to this split, with this label
            text = "".join(doc.tokens or ())
            first = [t for t in texts[0] | texts[1] | texts[2] if text.startswith(t + " ")]
            assert first and all(own.get(t) == doc.label for t in first)


# --------------------------------------------------------------------------------- image


def write_idx(path: Path, array: np.ndarray) -> Path:
    header = bytes([0, 0, 8, array.ndim]) + np.asarray(array.shape, dtype=">u4").tobytes()
    with gzip.open(path, "wb") as f:
        f.write(header + array.astype(np.uint8).tobytes())
    return path


def test_read_idx(tmp_path: Path) -> None:
    images = np.arange(2 * 3 * 4).reshape(2, 3, 4)
    assert np.array_equal(read_idx(write_idx(tmp_path / "i.gz", images)), images)
    with gzip.open(tmp_path / "short.gz", "wb") as f:
        f.write(bytes([0, 0, 8, 1]) + np.asarray([5], dtype=">u4").tobytes() + b"\x01")
    with pytest.raises(DataError, match="expected"):
        read_idx(tmp_path / "short.gz")
    (tmp_path / "plain").write_bytes(b"not gzip")
    with pytest.raises(DataError, match="gzip"):
        read_idx(tmp_path / "plain")


def test_lra_image_recipe_on_fashion_mnist(fetched: Callable[[str], Recipe]) -> None:
    recipe = fetched("lra-image")
    assert (recipe.task, recipe.input) == ("sequence", "text")
    small = dataclasses.replace(recipe, build=lra_image_builder(300, dev_size=100, test_size=50))
    splits = small.load()
    assert (len(splits.train), len(splits.dev), len(splits.test)) == (300, 100, 50)
    for example in splits.train + splits.dev + splits.test:
        assert example.tokens is not None and len(example.tokens) == 28 * 28
        assert set(example.tokens) <= set(PIXEL_TOKENS) and example.label in FASHION_MNIST_CLASSES
    train_ids = {e.source for e in splits.train}
    assert not train_ids & {e.source for e in splits.dev}
    assert all("train-images" in s for s in train_ids)
    # The official test set, in file order: image 0 is an ankle boot, image 1 a pullover.
    assert splits.test[0].source.endswith("t10k-images-idx3-ubyte.gz[0]")
    assert [e.label for e in splits.test[:2]] == ["Ankle boot", "Pullover"]
    # The same seeded dev holdout whatever the training size.
    other = dataclasses.replace(recipe, build=lra_image_builder(10, dev_size=100, test_size=1))
    assert [e.source for e in other.load().dev] == [e.source for e in splits.dev]


# ------------------------------------------------------------------------------ registry


def test_lra_recipes_are_registered_as_sequence_text_tasks() -> None:
    for name in LRA_RECIPES:
        recipe = RECIPES[name]
        assert (recipe.task, recipe.input) == ("sequence", "text")
        assert "Long Range Arena" in recipe.description and recipe.licence
    assert "stand-in" in RECIPES["lra-text"].description
    assert RECIPES["lra-text"].source == RECIPES["sentiment-rt"].source
