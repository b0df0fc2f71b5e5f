"""``selfattn eval RUN --data FILE``: any labelled file a run's task type reads, scored
with the run's vocabularies and labels.

For every task type a tiny run is trained for one step with its test file in
``data.test``: scoring that file with ``--data`` gives the JSON of ``--split test``, key
for key; so does a recipe's test split written out to a file. Every bad file is refused
in one line with exit status 2, and nothing is written.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from selfattn.cli.main import main
from selfattn.data.recipes import Recipe
from selfattn.datatypes import DataError
from selfattn.tasks.scored_data import DataFile, read_data_file

from ..helpers_cli import QUICK_TRAIN, TINY_MODEL, one_line_error, set_flags, write_config
from ..helpers_data import write_pairs, write_tagged, write_vector_sets
from .test_cli_multilabel import label_sets
from .test_cli_own_data import reviews

pytestmark = pytest.mark.usefixtures("one_thread")

#: A timing, which differs between two runs of the same decoding.
TIMINGS = ("sentences_per_s",)

Writer = Callable[[Path, int, int], Path]
KINDS: dict[str, tuple[str, Writer, str]] = {
    # name: (file suffix, writer(path, count, seed), data.task)
    "token": (".txt", lambda p, n, s: write_tagged(p, n, s), "auto"),
    "sequence": (".csv", lambda p, n, s: reviews(p, n, s), "auto"),
    "regression": (".csv", lambda p, n, s: reviews(p, n, s, numbers=True), "regression"),
    "multilabel": (".jsonl", lambda p, n, s: label_sets(p, n, s), "auto"),
    "seq2seq": (".tsv", lambda p, n, s: write_pairs(p, n, s, symbols="abcd", longest=4), "seq2seq"),
    "vectors": (".npz", lambda p, n, s: write_vector_sets(p, n, s, largest=5), "auto"),
}


def trained(folder: Path, kind: str) -> tuple[Path, Path]:
    """A run of ``kind`` trained for one step in ``folder``, and its test file."""
    suffix, write, task = KINDS[kind]
    train = write(folder / f"train{suffix}", 24, 0)
    test = write(folder / f"test{suffix}", 8, 1)
    config = write_config(
        folder / "config.toml",
        run_dir=folder / "run",
        data={"dataset": train, "test": test, "task": task, "batch_size": 8, "dev_fraction": 0},
        model=TINY_MODEL,
        train={**QUICK_TRAIN, "epochs": 1, "max_steps": 1},
    )
    argv = ["train", str(config), "--no-progress", *set_flags("train.threads=1")]
    assert main(argv) == 0
    return folder / "run", test


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, Path]]:
    """Every kind's run, trained once for the module."""
    return {kind: trained(tmp_path_factory.mktemp(kind), kind) for kind in KINDS}


def evaluated(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    capsys.readouterr()
    assert main(["eval", *argv]) == 0
    report: dict[str, Any] = json.loads(capsys.readouterr().out)
    for timing in TIMINGS:
        report.pop(timing, None)
    return report


@pytest.mark.parametrize("kind", list(KINDS))
def test_the_test_file_scores_as_the_test_split(
    runs: dict[str, tuple[Path, Path]], capsys: pytest.CaptureFixture[str], kind: str
) -> None:
    run, test = runs[kind]
    split = evaluated(capsys, str(run), "--split", "test")
    data = evaluated(capsys, str(run), "--data", str(test))
    assert split.pop("split") == "test" and data.pop("data") == str(test)
    assert data == split
    assert data["count"] > 0


def test_format_reads_a_file_whatever_its_name(
    runs: dict[str, tuple[Path, Path]], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    run, test = runs["sequence"]
    renamed = tmp_path / "reviews.data"
    renamed.write_bytes(test.read_bytes())
    expected = evaluated(capsys, str(run), "--data", str(test))
    got = evaluated(capsys, str(run), "--data", str(renamed), "--format", "csv")
    assert got.pop("data") == str(renamed) and expected.pop("data") == str(test)
    assert got == expected
    err = one_line_error(capsys, ["eval", str(run), "--data", str(renamed)])
    assert err == (
        f"selfattn eval: error: {renamed}: unknown file type '.data' "
        "(known: .txt, .conllu, .csv, .tsv, .npz, .ts, .jsonl)"
    )


#: A kind's file that scores (its first line), and the line after it with a label the run lacks.
OTHER_FILES = {
    "token": ("other.txt", ["I/PRP saw/VBD a/DT saw/NN", "", "it/PRP bit/VBD the/DT cat/XX"]),
    "multilabel": (
        "other.jsonl",
        [
            '{"text": "a red cat", "labels": ["animal", "colour"]}',
            '{"text": "a rose", "labels": ["plant"]}',
        ],
    ),
}
UNSEEN = {"token": "XX", "multilabel": "plant"}


@pytest.mark.parametrize("kind", list(OTHER_FILES))
def test_another_file_is_scored_with_the_runs_labels_and_an_unseen_one_named(
    runs: dict[str, tuple[Path, Path]],
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    kind: str,
) -> None:
    run, _ = runs[kind]
    name, lines = OTHER_FILES[kind]
    path = tmp_path / name
    path.write_text(lines[0] + "\n", "utf-8")
    report = evaluated(capsys, str(run), "--data", str(path))
    assert report["data"] == str(path) and report["count"] == (4 if kind == "token" else 1)
    path.write_text("\n".join(lines) + "\n", "utf-8")
    err = one_line_error(capsys, ["eval", str(run), "--data", str(path)])
    assert err.startswith(
        f"selfattn eval: error: {path}:{len(lines)}: label {UNSEEN[kind]!r} is not one of "
        "this model's"
    ), err


@pytest.mark.parametrize(
    ("kind", "name", "content", "message"),
    [
        ("token", "gone.txt", None, "{path}: no such file"),
        ("token", "empty.txt", "", "{path}: no examples in the file"),
        ("token", "a.csv", "pos,a film\n", "{path}: holds a label per input (sequence data), but"),
        ("sequence", "a.txt", "I/PRP saw/VBD\n", "{path}: holds a label per token (token data)"),
        ("regression", "a.txt", "I/PRP\n", "{path}: holds a label per token (token data), but"),
        ("multilabel", "a.csv", "x,a cat\n", "{path}: holds a label per input (sequence data)"),
        ("token", "a.txt", "I/PRP saw\n", "{path}:1: token 'saw' is not word/TAG"),
        ("regression", "a.csv", "label,text\nmany,a film\n", "{path}:2: a regression label"),
        ("vectors", "a.csv", "up,a film\n", "{path}: holds text input, but this model reads"),
        ("token", "a.npz", "not a zip", "{path}: "),
    ],
    ids=[
        "missing",
        "empty",
        "csv-for-token",
        "txt-for-sequence",
        "txt-for-regression",
        "csv-for-multilabel",
        "malformed",
        "not-a-number",
        "text",
        "zip",
    ],
)
def test_a_bad_file_is_refused_in_one_line(
    runs: dict[str, tuple[Path, Path]],
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    kind: str,
    name: str,
    content: str | None,
    message: str,
) -> None:
    run, _ = runs[kind]
    path = tmp_path / name
    if content is not None:
        path.write_text(content, encoding="utf-8")
    before = sorted(p.name for p in tmp_path.iterdir())
    err = one_line_error(capsys, ["eval", str(run), "--data", str(path)])
    assert err.startswith("selfattn eval: error: " + message.format(path=path)), err
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # nothing written


def test_vectors_of_another_width_are_refused(
    runs: dict[str, tuple[Path, Path]], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    run, _ = runs["vectors"]
    wide = tmp_path / "wide.npz"
    np.savez(wide, features=np.ones((3, 5), np.float32), lengths=np.array([3]), labels=["up"])
    err = one_line_error(capsys, ["eval", str(run), "--data", str(wide)])
    assert err.endswith("vectors of 5 features; this model reads 3 per vector"), err


def test_format_needs_data_and_data_excludes_split(
    runs: dict[str, tuple[Path, Path]], capsys: pytest.CaptureFixture[str]
) -> None:
    run, test = runs["sequence"]
    err = one_line_error(capsys, ["eval", str(run), "--format", "csv"])
    assert err.endswith("--format says how to read the file of --data; give --data FILE")
    with pytest.raises(SystemExit) as exit_:
        main(["eval", str(run), "--split", "dev", "--data", str(test)])
    assert exit_.value.code == 2
    assert "not allowed with argument" in capsys.readouterr().err


def test_a_recipes_test_split_written_out_scores_as_the_split(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], fetched: Callable[[str], Recipe]
) -> None:
    """A run of a recipe (digits: 8×8 images as vector sets) scores its test split,
    written out as an ``.npz`` of its own, exactly as ``--split test``."""
    test = fetched("digits").load().test
    written = tmp_path / "digits-test.npz"
    np.savez(
        written,
        features=np.concatenate([example.features for example in test]),
        lengths=np.array([len(example) for example in test]),
        labels=np.array([example.label for example in test]),
    )
    config = write_config(
        tmp_path / "digits.toml",
        run_dir=tmp_path / "run",
        data={"dataset": "digits", "batch_size": 32},
        model=TINY_MODEL,
        train={**QUICK_TRAIN, "epochs": 1, "max_steps": 1},
    )
    assert main(["train", str(config), "--no-progress"]) == 0
    split = evaluated(capsys, str(tmp_path / "run"), "--split", "test")
    data = evaluated(capsys, str(tmp_path / "run"), "--data", str(written))
    assert split.pop("split") == "test" and data.pop("data") == str(written)
    assert data == split and data["count"] == len(test)


@pytest.mark.parametrize(
    ("name", "kind", "what"), [("bits", None, "bit vectors"), ("token", "graph", "graphs")]
)
def test_a_model_of_graphs_or_bits_points_to_its_splits(
    tmp_path: Path, name: str, kind: str | None, what: str
) -> None:
    """No file format of ``selfattn train`` holds graphs (their edges) or bit vectors."""
    task = SimpleNamespace(
        name=name, layout=name, reader={"kind": kind}, spec=SimpleNamespace(task=name)
    )
    path = write_vector_sets(tmp_path / "sets.npz", 4)
    with pytest.raises(DataError) as refused:
        read_data_file(task, DataFile(path))  # type: ignore[arg-type]
    assert str(refused.value) == (
        f"{path}: this model reads {what}, and no file format of selfattn train holds them; "
        "score its dataset with --split"
    )


def test_early_exit_scores_a_file_as_its_split(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--exit-threshold`` / ``--exit-sweep`` with ``--data``: the numbers of the split the
    file holds (the timings aside); the sweep's plot is named after the file."""
    train = reviews(tmp_path / "train.csv", 24)
    test = reviews(tmp_path / "test.csv", 8, seed=1)
    config = write_config(
        tmp_path / "exit.toml",
        run_dir=tmp_path / "run",
        data={"dataset": train, "test": test, "batch_size": 8},
        model={**TINY_MODEL, "num_layers": 2, "exit_heads": True},
        train={**QUICK_TRAIN, "epochs": 1, "max_steps": 1},
    )
    assert main(["train", str(config), "--no-progress"]) == 0
    run, threshold = str(tmp_path / "run"), ["--exit-threshold", "0.6"]
    split = evaluated(capsys, run, "--split", "test", *threshold)
    data = evaluated(capsys, run, "--data", str(test), *threshold)
    assert split.pop("split") == "test" and data.pop("data") == str(test)
    timings = [key for key in split if "seconds" in key or key == "time_ratio"]
    assert timings and all(split.pop(key) > 0 and data.pop(key) > 0 for key in timings)
    assert data == split and data["exit_threshold"] == 0.6
    capsys.readouterr()
    assert main(["eval", run, "--data", str(test), "--exit-sweep"]) == 0
    assert f"{test}: early exit on max-prob" in capsys.readouterr().out
    assert (tmp_path / "run" / "exit_sweep_test.png").read_bytes()[:4] == b"\x89PNG"
