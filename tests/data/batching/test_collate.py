"""Collation into padded batches, and length-bucketed batching."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from selfattn.data import (
    IGNORE_INDEX,
    CharVocabulary,
    Collator,
    DataError,
    Example,
    LabelVocabulary,
    Vocabulary,
    batches,
)

TAGGED = [
    Example(("the", "cat", "sat"), None, ("DT", "NN", "VB"), "a.txt:1"),
    Example(("a", "dog"), None, ("DT", "NN"), "a.txt:2"),
]


def text_collator(task: str = "token", max_len: int | None = None) -> Collator:
    vocab = Vocabulary.build(e.tokens or () for e in TAGGED)
    chars = CharVocabulary.build((e.tokens or () for e in TAGGED), max_word_len=5)
    labels = LabelVocabulary(["DT", "NN", "VB", "pos"])
    return Collator(vocab, chars, labels, task, max_len)  # type: ignore[arg-type]


def test_token_batch_shapes_mask_and_ignored_labels() -> None:
    batch = text_collator()(TAGGED)
    assert batch.token_ids is not None and batch.char_ids is not None
    assert batch.token_ids.shape == (2, 3) and batch.char_ids.shape == (2, 3, 5)
    assert batch.features is None
    assert batch.key_padding_mask.tolist() == [[False, False, False], [False, False, True]]
    assert batch.labels.tolist() == [[0, 1, 2], [0, 1, IGNORE_INDEX]]
    assert batch.token_ids[1, 2] == 0 and batch.char_ids[1, 2].eq(0).all()
    assert batch.num_tokens == 5


def test_sequence_batch_of_vectors() -> None:
    examples = [
        Example(None, np.ones((2, 4), np.float32), "x", "v[0]"),
        Example(None, np.full((4, 4), 2.0, np.float32), "y", "v[1]"),
    ]
    batch = Collator(None, None, LabelVocabulary(["x", "y"]), "sequence")(examples)
    assert batch.features is not None and batch.features.shape == (2, 4, 4)
    assert batch.features[0, 2:].eq(0).all() and batch.features.dtype == torch.float32
    assert batch.labels.tolist() == [0, 1]
    assert batch.key_padding_mask.sum().item() == 2


def test_too_long_example_names_source_and_lengths() -> None:
    with pytest.raises(DataError, match=r"a\.txt:1: example has length 3, longer than max_len 2"):
        text_collator(max_len=2)(TAGGED)


def test_empty_example_names_source() -> None:
    with pytest.raises(DataError, match=r"e\.txt:9: empty example"):
        text_collator()([Example((), None, (), "e.txt:9")])


def test_unseen_label_names_source() -> None:
    with pytest.raises(DataError, match=r"b\.txt:4: label 'JJ'"):
        text_collator()([Example(("big",), None, ("JJ",), "b.txt:4")])


def test_label_count_must_match_length() -> None:
    with pytest.raises(DataError, match=r"c\.txt:1: .*2 label\(s\) for length 1"):
        text_collator()([Example(("x",), None, ("DT", "NN"), "c.txt:1")])


def make_examples(n: int) -> list[Example]:
    rng = np.random.default_rng(1)
    return [Example(("w",) * int(rng.integers(1, 30)), None, "pos", f"f:{i}") for i in range(n)]


def test_batches_deterministic_and_complete() -> None:
    examples = make_examples(203)
    first = batches(examples, 8, shuffle=True, seed=3, bucket_batches=4)
    again = batches(examples, 8, shuffle=True, seed=3, bucket_batches=4)
    other = batches(examples, 8, shuffle=True, seed=4, bucket_batches=4)
    sources = [e.source for group in first for e in group]
    assert sources == [e.source for group in again for e in group]
    assert sources != [e.source for group in other for e in group]
    assert sorted(sources) == sorted(e.source for e in examples)  # each exactly once
    assert all(1 <= len(group) <= 8 for group in first)


def test_batches_bucket_lengths_and_keep_order_without_shuffle() -> None:
    examples = make_examples(400)
    spread = [max(map(len, g)) - min(map(len, g)) for g in batches(examples, 16, shuffle=True)]
    assert np.mean(spread) < 5  # sorted within chunks: similar lengths per batch
    ordered = batches(examples, 16, shuffle=False)
    assert [e for group in ordered for e in group] == examples
