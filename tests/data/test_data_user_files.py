"""A user's own files: the held-out dev set, data.max_len at load time, windows, and the
messages a malformed file gets."""

from __future__ import annotations

import numpy as np
import pytest

from selfattn.data import DataError, Example, load_dataset, read_classification_csv, read_npz
from selfattn.data.lengths import fit_examples, window_spans
from selfattn.data.splits import dev_holdout


def labelled(labels: str) -> list[Example]:
    return [Example((f"w{i}",), None, label, f"f.csv:{i + 1}") for i, label in enumerate(labels)]


# --------------------------------------------------------------------------- dev hold-out


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


def test_load_dataset_holds_out_dev_only_without_a_dev_file(tmp_path) -> None:  # type: ignore[no-untyped-def]
    rows = "\n".join(f"{'pos' if i % 2 else 'neg'},text number {i}" for i in range(40))
    train = tmp_path / "train.csv"
    train.write_text(rows + "\n", encoding="utf-8")
    held = load_dataset(train, dev_fraction=0.1)
    assert held.dev_from_train and (len(held.train), len(held.dev)) == (36, 4)
    assert sorted(e.label for e in held.dev) == ["neg", "neg", "pos", "pos"]
    given = load_dataset(train, dev=train, dev_fraction=0.1)
    assert not given.dev_from_train and len(given.train) == len(given.dev) == 40
    assert not load_dataset(train).dev  # the library's default: no hold-out


def test_regression_user_file_needs_numbers(tmp_path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "y.csv"
    path.write_text("1.5,a text\n-2,another\n", encoding="utf-8")
    splits = load_dataset(path, task="regression")
    assert splits.task == "regression" and [e.label for e in splits.train] == ["1.5", "-2"]
    path.write_text("1.5,a text\nhigh,another\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"y\.csv:2: a regression label must be one number"):
        load_dataset(path, task="regression")


# --------------------------------------------------------------------------- max_len


TAGGED = Example(tuple("abcdef"), None, tuple("ABCDEF"), "t.txt:7")


def test_refuse_names_file_line_and_both_lengths() -> None:
    assert fit_examples([TAGGED], 6, "refuse", "token") == ([TAGGED], 0)
    message = (
        "t.txt:7: 6 tokens, longer than data.max_len = 4 (raise data.max_len or set "
        'data.overlong = "cut")'
    )
    with pytest.raises(
        DataError, match="^" + message.replace("(", r"\(").replace(")", r"\)") + "$"
    ):
        fit_examples([TAGGED], 4, "refuse", "token")
    vectors = Example(None, np.zeros((5, 2), np.float32), "x", "v.npz[3]")
    with pytest.raises(DataError, match=r"v\.npz\[3\]: 5 vectors, longer than data.max_len = 2"):
        fit_examples([vectors], 2, "refuse", "sequence")
    pair = Example(("a",), None, tuple("abcde"), "p.tsv:2")
    with pytest.raises(DataError, match=r"p\.tsv:2: a target of 5 tokens, longer than"):
        fit_examples([pair], 3, "refuse", "seq2seq")


def test_cut_keeps_the_first_positions_and_their_labels() -> None:
    (cut,), count = fit_examples([TAGGED], 4, "cut", "token")
    assert count == 1 and cut.tokens == tuple("abcd") and cut.label == tuple("ABCD")
    sentence = Example(tuple("abcdef"), None, "pos", "s.csv:2")
    assert fit_examples([sentence], 2, "cut", "sequence")[0][0].label == "pos"
    pair = Example(tuple("abcdef"), None, tuple("vwxyz"), "p.tsv:1")
    (cut,), _ = fit_examples([pair], 3, "cut", "seq2seq")
    assert cut.tokens == tuple("abc") and cut.label == tuple("vwx")


def test_cut_graph_keeps_edges_between_kept_nodes() -> None:
    edges = np.array([[0, 1], [1, 0], [1, 3], [3, 1], [2, 0]])
    graph = Example(
        None,
        np.eye(4, dtype=np.float32),
        "c",
        "g[0]",
        edges=edges,
        edge_features=np.arange(5.0)[:, None],
    )
    (cut,), _ = fit_examples([graph], 3, "cut", "sequence")
    assert cut.features is not None and cut.features.shape == (3, 4)
    assert cut.edges is not None and cut.edges.tolist() == [[0, 1], [1, 0], [2, 0]]
    assert cut.edge_features is not None and cut.edge_features[:, 0].tolist() == [0.0, 1.0, 4.0]


def test_cutting_a_pointer_target_past_the_source_is_refused() -> None:
    hull = Example(None, np.zeros((5, 2), np.float32), ("0", "4", "2"), "hull[1]")
    with pytest.raises(DataError, match=r"hull\[1\]: cannot cut: .*source position 4"):
        fit_examples([hull], 3, "cut", "seq2seq", pointer=True)


@pytest.mark.parametrize(("length", "size"), [(10, 4), (9, 4), (20, 8), (7, 1), (100, 7), (5, 5)])
def test_window_spans_tile_and_pick_the_most_central_window(length: int, size: int) -> None:
    spans = window_spans(length, size)
    kept = [p for _, lo, hi in spans for p in range(lo, hi)]
    assert kept == list(range(length))
    starts = sorted({start for start, _, _ in spans})
    for start, lo, hi in spans:
        assert 0 <= start <= lo < hi <= start + size and start + size <= max(length, size)
        for p in range(lo, hi):  # no other window has p farther from both of its edges
            margin = min(p - start, start + size - 1 - p)
            others = [min(p - s, s + size - 1 - p) for s in starts if s <= p < s + size]
            assert margin == max(others)


# --------------------------------------------------------------------------- messages


def test_unclosed_csv_quote_is_reported_where_it_opens(tmp_path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "q.csv"
    path.write_text('label,text\npos,good film\nneg,"unclosed text\npos,fine\nneg,more\n')
    with pytest.raises(DataError, match=r"^\S*q\.csv:3: a quoted field opened on this line"):
        read_classification_csv(path)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"not a zip archive at all", "not a valid .npz file"),
        (b"", "not a valid .npz file"),
        (None, "a single .npy array, not an .npz archive"),
        ("objects", "array 'features' holds Python objects"),
    ],
)
def test_bad_npz_is_named_and_never_advises_pickle(
    tmp_path,
    content: bytes | str | None,
    message: str,  # type: ignore[no-untyped-def]
) -> None:
    path = tmp_path / "data.npz"
    if content is None:
        with path.open("wb") as file:
            np.save(file, np.zeros(3))
    elif content == "objects":
        np.savez(path, features=np.array([{"a": 1}], dtype=object))
    else:
        assert isinstance(content, bytes)
        path.write_bytes(content)
    with pytest.raises(DataError) as error:
        read_npz(path)
    text = str(error.value)
    assert text.startswith(f"{path}: ") and message in text and "pickle" not in text.lower()
