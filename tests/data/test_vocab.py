"""Vocabularies: ids, unknowns, serialisation, BPE."""

from __future__ import annotations

import json

import pytest
from tokenizers import Tokenizer

from selfattn.data import (
    CharVocabulary,
    DataError,
    DatasetSplits,
    Example,
    LabelVocabulary,
    Vocabulary,
    bpe_retokenize,
    bpe_vocabulary,
    train_bpe,
)
from selfattn.specials import PAD_ID, UNK_ID


def test_vocabulary_ids_min_freq_and_unknowns() -> None:
    vocab = Vocabulary.build([["the", "cat"], ["the", "dog"], ["The"]], min_freq=2)
    assert vocab.decode([0, 1]) == ["<pad>", "<unk>"]
    assert vocab.encode(["the", "cat", "zebra"]) == [2, UNK_ID, UNK_ID]
    assert "cat" not in vocab and len(vocab) == 3

    folded = Vocabulary.build([["the", "cat"], ["The"]], lowercase=True)
    assert folded.encode(["THE"]) == [2]  # "the" is the most frequent, so id 2


def test_vocabulary_order_is_frequency_then_alphabet() -> None:
    vocab = Vocabulary.build([["b", "a", "c", "c"]])
    assert vocab.decode([2, 3, 4]) == ["c", "a", "b"]


def test_vocabulary_round_trips_through_json() -> None:
    vocab = Vocabulary.build([["x", "y", "y"]], lowercase=True)
    again = Vocabulary.from_dict(json.loads(json.dumps(vocab.to_dict())))
    assert again.encode(["Y", "x", "q"]) == vocab.encode(["Y", "x", "q"])
    assert again.lowercase and len(again) == len(vocab)


def test_label_vocabulary_unseen_label_names_source() -> None:
    labels = LabelVocabulary.build([Example(("a",), None, ("NN",)), Example(("b",), None, ("DT",))])
    assert labels.labels == ["DT", "NN"] and labels.encode("NN") == 1
    with pytest.raises(DataError, match=r"dev\.txt:7: label 'VB' was not seen"):
        labels.encode("VB", source="dev.txt:7")
    assert LabelVocabulary.from_dict(labels.to_dict()).labels == labels.labels


def test_label_vocabulary_for_splits_covers_dev_and_test() -> None:
    splits = DatasetSplits(
        "toy",
        "sequence",
        "text",
        train=[Example(("a",), None, "x")],
        dev=[Example(("b",), None, "y")],
        test=[Example(("c",), None, "z")],
    )
    assert LabelVocabulary.for_splits(splits).labels == ["x", "y", "z"]


def test_char_vocabulary_pads_and_truncates() -> None:
    chars = CharVocabulary.build([["ab", "ba"], ["abc"]], max_word_len=4)
    ids = chars.encode(["abcabc", "a", "z"])
    assert [len(w) for w in ids] == [4, 4, 4]
    a, b, c = chars.chars.encode(["a", "b", "c"])
    assert ids[0] == [a, b, c, a]
    assert ids[1] == [a, PAD_ID, PAD_ID, PAD_ID]
    assert ids[2] == [UNK_ID, PAD_ID, PAD_ID, PAD_ID]
    again = CharVocabulary.from_dict(json.loads(json.dumps(chars.to_dict())))
    assert again.encode(["abcabc"]) == ids[:1] and again.max_word_len == 4


SENTENCES = [
    "the lower the better",
    "the newest and the lowest",
    "a wider and wiser road",
    "lower newer wider",
] * 3


def test_bpe_trains_and_round_trips_through_json() -> None:
    tokenizer = train_bpe(SENTENCES, vocab_size=60)
    vocab = bpe_vocabulary(tokenizer)
    assert vocab.decode([0, 1]) == ["<pad>", "<unk>"]
    encoding = tokenizer.encode("the lowest wider")
    assert vocab.encode(encoding.tokens) == encoding.ids  # same ids as the tokenizer
    assert tokenizer.decode(encoding.ids) == "the lowest wider"

    again = Tokenizer.from_str(tokenizer.to_str())
    assert again.encode("the lowest wider").ids == encoding.ids


def test_bpe_retokenize_keeps_labels_and_rejects_token_tasks() -> None:
    tokenizer = train_bpe(SENTENCES, vocab_size=40)
    [example] = bpe_retokenize([Example(("the", "widest"), None, "pos", "f:1")], tokenizer)
    assert example.label == "pos" and example.source == "f:1"
    assert len(example.tokens or ()) >= 2
    with pytest.raises(ValueError, match="token tasks keep words"):
        bpe_retokenize([Example(("the",), None, ("DT",))], tokenizer)
