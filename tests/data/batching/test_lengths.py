"""Fitting examples to data.max_len: refusing with a message naming the file and line,
cutting (labels, graph edges, pointer targets), and windows that tile a long input."""

from __future__ import annotations

import numpy as np
import pytest

from selfattn.data import DataError, Example
from selfattn.data.batching.lengths import fit_examples, window_spans

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
