"""File readers: good input parses, malformed input names ``file:line``."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from selfattn.data import (
    DataError,
    load_dataset,
    read_classification_csv,
    read_conllu,
    read_npz,
    read_parallel,
    read_tagged,
    read_ts,
    tokenize,
)
from selfattn.data.readers.stories import read_stories

from ...helpers_data import read_error, write

# --------------------------------------------------------------------------- tagged


def test_tagged_reads_words_and_tags(tmp_path: Path) -> None:
    path = write(tmp_path / "a.txt", "The/DT cat/NN ./.\n\n1/2/CD a/DT\n")
    examples = read_tagged(path)
    assert [e.tokens for e in examples] == [("The", "cat", "."), ("1/2", "a")]
    assert examples[1].label == ("CD", "DT")
    assert examples[1].source == f"{path}:3"


@pytest.mark.parametrize("bad", ["cat", "/NN", "cat/"])
def test_tagged_malformed_token_names_line(tmp_path: Path, bad: str) -> None:
    path = write(tmp_path / "bad.txt", f"The/DT dog/NN\nA/DT {bad}\n")
    with pytest.raises(DataError, match=rf"bad\.txt:2: token '{bad}'"):
        read_tagged(path)


def test_bad_utf8_names_line(tmp_path: Path) -> None:
    path = tmp_path / "latin.txt"
    path.write_bytes(b"a/DT\nb/NN\n\xe9t\xe9/NN\n")
    with pytest.raises(DataError, match=r"latin\.txt:3: not valid UTF-8"):
        read_tagged(path)


# --------------------------------------------------------------------------- CoNLL-U

CONLLU = (
    "# text = Don't go.\n"
    "1-2\tDon't\t_\t_\t_\t_\t_\t_\t_\t_\n"
    "1\tDo\tdo\tAUX\tVBP\t_\t3\taux\t_\t_\n"
    "2\tn't\tnot\tPART\tRB\t_\t3\tadvmod\t_\t_\n"
    "3\tgo\tgo\tVERB\tVB\t_\t0\troot\t_\t_\n"
    "3.1\tgone\tgo\tVERB\tVBN\t_\t_\t_\t_\t_\n"
    "4\t.\t.\tPUNCT\t.\t_\t3\tpunct\t_\t_\n"
    "\n"
    "1\tHi\thi\tINTJ\tUH\t_\t0\troot\t_\t_\n"
)


def test_conllu_upos_and_xpos(tmp_path: Path) -> None:
    path = write(tmp_path / "a.conllu", CONLLU)
    first, second = read_conllu(path)
    assert first.tokens == ("Do", "n't", "go", ".")
    assert first.label == ("AUX", "PART", "VERB", "PUNCT")
    assert first.source == f"{path}:1"
    assert second.tokens == ("Hi",) and second.source == f"{path}:9"
    assert read_conllu(path, tag="xpos")[0].label == ("VBP", "RB", "VB", ".")


# --------------------------------------------------------------------------- label,text


def test_tokenize_words_numbers_punctuation() -> None:
    assert tokenize("It's 3.5 stars, after-effects!") == [
        "It's",
        "3.5",
        "stars",
        ",",
        "after-effects",
        "!",
    ]


def test_csv_with_bom_and_header(tmp_path: Path) -> None:
    path = write(
        tmp_path / "a.csv", 'label,text\npos,"Great, fun film."\n\nneg,Dull.\n', "utf-8-sig"
    )
    examples = read_classification_csv(path)
    assert [(e.label, e.tokens) for e in examples] == [
        ("pos", ("Great", ",", "fun", "film", ".")),
        ("neg", ("Dull", ".")),
    ]
    assert examples[1].source == f"{path}:4"


def test_csv_without_header_keeps_first_row(tmp_path: Path) -> None:
    path = write(tmp_path / "a.csv", "1,good\n-1,bad\n")
    assert [e.label for e in read_classification_csv(path)] == ["1", "-1"]


def test_tsv_by_extension_and_explicit(tmp_path: Path) -> None:
    path = write(tmp_path / "a.tsv", "label\ttext\npos\tYes, really.\n")
    assert read_classification_csv(path)[0].tokens == ("Yes", ",", "really", ".")
    other = write(tmp_path / "b.data", "pos\tYes\n")
    assert read_classification_csv(other, delimiter="\t")[0].label == "pos"


# --------------------------------------------------------------------------- npz


def test_npz_sequence_and_token_labels(tmp_path: Path) -> None:
    features = np.arange(10, dtype=np.float64).reshape(5, 2)
    path = tmp_path / "seq.npz"
    np.savez(path, features=features, lengths=np.array([2, 3]), labels=np.array(["a", "b"]))
    first, second = read_npz(path)
    assert first.label == "a" and second.features is not None
    assert second.features.shape == (3, 2) and second.features.dtype == np.float32
    np.testing.assert_array_equal(second.features, features[2:])

    path = tmp_path / "tok.npz"
    np.savez(path, features=features, lengths=np.array([2, 3]), labels=np.array([0, 1, 2, 3, 4]))
    assert read_npz(path)[1].label == ("2", "3", "4")


def test_npz_explicit_task_disambiguates(tmp_path: Path) -> None:
    path = tmp_path / "ones.npz"
    one = np.ones((2, 3))
    np.savez(path, features=one, lengths=np.array([1, 1]), labels=np.array([0, 1]), task="token")
    assert read_npz(path)[0].label == ("0",)


GOOD = {"features": np.ones((3, 2)), "lengths": np.array([1, 2]), "labels": np.array([0, 1])}


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"features": None}, "missing array 'features'"),
        ({"lengths": np.array([2])}, "'lengths' sum to 2 but 'features' has 3 rows"),
        ({"features": np.ones(3)}, "must be a numeric (N_total, F) array"),
        ({"features": np.full((3, 2), np.nan)}, "row 0 holds NaN or inf"),
        ({"lengths": np.array([3, 0])}, "set 1 has length 0"),
        ({"labels": np.array([0])}, "expected 2 (one per set) or 3 (one per vector)"),
    ],
)
def test_npz_invalid_arrays(tmp_path: Path, change: dict[str, object], message: str) -> None:
    arrays = {k: v for k, v in {**GOOD, **change}.items() if v is not None}
    path = tmp_path / "bad.npz"
    np.savez(path, **arrays)  # type: ignore[arg-type]
    with pytest.raises(DataError, match=r"bad\.npz: .*" + re.escape(message)):
        read_npz(path)


# --------------------------------------------------------------------------- .ts

TS = """# comment
@problemName Toy
@dimensions 2
@classLabel true a b
@data
1,2,3:4,5,6:a

0.5,1.5:2.5,3.5:b
"""


def test_ts_reads_cases_as_length_by_dims(tmp_path: Path) -> None:
    path = write(tmp_path / "toy.ts", TS)
    first, second = read_ts(path)
    assert first.features is not None and first.features.shape == (3, 2)
    np.testing.assert_array_equal(first.features[:, 1], [4, 5, 6])
    assert (first.label, second.label) == ("a", "b")
    assert second.source == f"{path}:8"


# --------------------------------------------------------------------------- malformed lines

_CONLLU = "# c\n1\tHi\thi\tINTJ\tUH\t_\t0\troot\t_\t_\n"  # then a malformed line 3

#: Per reader and file name: malformed files, the line each one's refusal must name and a
#: pattern of what it must say.
MALFORMED = {
    (read_conllu, "bad.conllu"): [
        (_CONLLU + "2\tthere\tthere\tADV\n", 3, "expected 10 tab-separated columns"),
        (_CONLLU + "x\tthere\tthere\tADV\tRB\t_\t1\tadvmod\t_\t_\n", 3, "not a valid ID"),
        (_CONLLU + "2\tthere\tthere\t_\tRB\t_\t1\tadvmod\t_\t_\n", 3, "no UPOS tag"),
    ],
    (read_classification_csv, "bad.csv"): [
        ("pos,fine\npos,\n", 2, "empty text"),
        ("pos,fine\npos,   \n", 2, "empty text"),
        ("pos,fine\n,text\n", 2, "empty label"),
        ("pos,fine\na,b,c\n", 2, "2 fields"),
    ],
    (read_ts, "bad.ts"): [
        (TS + "1,2:3:a\n", 9, "differ in length"),
        (TS + "1,x:3,4:a\n", 9, "non-number"),
        (TS + "1,?:3,4:a\n", 9, "missing values"),
        (TS + "1,2:3,4:5,6:a\n", 9, "3 dimensions"),
    ],
    (read_parallel, "bad.txt"): [
        ("a\tb\nno tab here\n", 2, re.escape("exactly one tab), got 0 tabs")),
        ("a\tb\tc\n", 1, "got 2 tabs"),
        ("a\tb\n\nhello\t  \n", 3, "empty target side"),
        ("\tb\n", 1, "empty source side"),
    ],
    (read_stories, "bad.txt"): [
        ("Mary moved to the bathroom.\n", 1, "expected a numbered line"),
        ("1 Mary moved.\n3 John went.\n", 2, "line number 3 follows 1"),
        ("1 Mary moved to the bathroom.\n2 Where is Mary?\t\t1\n", 2, "without its answer"),
        ("1 Mary moved.\n2 Where is Mary?\tbathroom\t5\n", 2, "supporting fact '5'"),
        ("1 Mary moved.\n2 Where is Mary?\tbathroom\t2\n", 2, "supporting fact '2'"),
    ],
}


@pytest.mark.parametrize(
    ("reader", "name", "text", "line", "message"),
    [(*where, *case) for where, cases in MALFORMED.items() for case in cases],
)
def test_malformed_line_names_file_and_line(
    tmp_path: Path,
    reader: Callable[[Path], object],
    name: str,
    text: str,
    line: int,
    message: str,
) -> None:
    """Every reader's refusal of a malformed file: one line, starting ``file:line:``."""
    path = write(tmp_path / name, text)
    error = read_error(reader, path)
    assert error.startswith(f"{path}:{line}: ") and re.search(message, error)


# --------------------------------------------------------------------------- dispatch


def test_load_dataset_dispatches_user_files(tmp_path: Path) -> None:
    train = write(tmp_path / "train.txt", "a/DT b/NN\n")
    dev = write(tmp_path / "dev.txt", "c/NN\n")
    splits = load_dataset(train, dev=dev)
    assert (splits.task, splits.input, splits.name) == ("token", "text", "train")
    assert len(splits.train) == 1 and len(splits.dev) == 1 and splits.test == []

    csv_dev = write(tmp_path / "dev.csv", "pos,good\n")
    with pytest.raises(DataError, match="dev file holds sequence/text data"):
        load_dataset(train, dev=csv_dev)


def test_load_dataset_unknown_name_and_extension(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="neither a recipe"):
        load_dataset("no-such-dataset")
    with pytest.raises(DataError, match=r"unknown file type '\.json'"):
        load_dataset(write(tmp_path / "x.json", "{}"))
