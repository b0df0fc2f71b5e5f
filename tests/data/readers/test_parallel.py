"""User parallel text: read_parallel and load_dataset(..., task="seq2seq") (its malformed
lines: test_formats.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from selfattn.data import DataError, load_dataset, read_parallel

from ...helpers_data import write


def test_read_parallel(tmp_path: Path) -> None:
    path = write(
        tmp_path / "pairs.tsv",
        "Guten Morgen!\tGood morning!\n\n  \nIch sehe eine Säge.\tI saw a saw.\r\n",
    )
    first, second = read_parallel(path)
    assert first.tokens == ("Guten", "Morgen", "!") and first.label == ("Good", "morning", "!")
    assert first.source == f"{path}:1" and first.features is None
    assert second.label == ("I", "saw", "a", "saw", ".") and second.source == f"{path}:4"
    assert len(second) == 5  # the source length; the target's is independent


def test_load_dataset_seq2seq_any_extension(tmp_path: Path) -> None:
    train = write(tmp_path / "train.tsv", "Hallo Welt .\tHello world .\nJa .\tYes .\n")
    dev = write(tmp_path / "dev.txt", "Nein .\tNo .\n")
    splits = load_dataset(train, dev=dev, task="seq2seq")
    assert splits.task == "seq2seq" and splits.input == "text"
    assert len(splits.train) == 2 and len(splits.dev) == 1 and splits.test == []
    assert splits.train[0].label == ("Hello", "world", ".")


def test_a_tsv_without_task_stays_classification(tmp_path: Path) -> None:
    # The same bytes are a valid label<TAB>text file: only task= makes them seq2seq.
    path = write(tmp_path / "train.tsv", "pos\tgood film\nneg\tbad film\n")
    splits = load_dataset(path)
    assert splits.task == "sequence" and splits.train[0].label == "pos"
    assert load_dataset(path, task="seq2seq").train[0].label == ("good", "film")


def test_stated_task_must_match_user_files(tmp_path: Path) -> None:
    tagged = write(tmp_path / "train.txt", "I/PRP saw/VBD\n")
    with pytest.raises(DataError, match=r"train\.txt: holds token data, not sequence"):
        load_dataset(tagged, task="sequence")
    assert load_dataset(tagged, task="token").task == "token"
    # With task="seq2seq" a word/TAG line has no tab: the parser says where.
    with pytest.raises(DataError, match=r"train\.txt:1: expected source<TAB>target"):
        load_dataset(tagged, task="seq2seq")
    with pytest.raises(DataError, match=r"not \.npz"):
        load_dataset(write(tmp_path / "x.npz", ""), task="seq2seq")
