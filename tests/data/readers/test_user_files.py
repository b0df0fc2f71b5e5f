"""A user's own files: the held-out dev set and the messages a malformed file gets.

(The hold-out itself is tested in ``batching/test_splits.py``, fitting to data.max_len in
``batching/test_lengths.py``.)"""

from __future__ import annotations

import numpy as np
import pytest

from selfattn.data import DataError, load_dataset, read_classification_csv, read_npz


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
