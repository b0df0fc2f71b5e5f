"""``load_dataset``: a registered recipe by name, or a user's own files.

User files are read by extension (``word/TAG`` text, CoNLL-U, ``label,text`` CSV/TSV,
``.npz`` vector sets, sktime ``.ts``, ``.jsonl`` texts with label sets), and their task
(token or sequence; multilabel for ``.jsonl``) is read off the labels. Seq2seq data
cannot be told apart that way — its labels are token tuples, and a ``source<TAB>target``
line is also a valid ``label<TAB>text`` row — so it is only ever chosen by the caller:
``load_dataset(path, task="seq2seq")``; so is regression (a number as each example's
label), ``task="regression"``.

Without a dev file, ``dev_fraction`` of the user's training file can be held out as the
dev set (seeded; :func:`~selfattn.data.batching.splits.dev_holdout`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Literal, get_args

from selfattn.data.batching.splits import dev_holdout
from selfattn.data.formats.numeric import FLOAT32_MAX, float32_or_none, read_npz, read_ts
from selfattn.data.formats.text import (
    read_classification_csv,
    read_conllu,
    read_parallel,
    read_tagged,
)
from selfattn.data.readers.label_sets import label_set_targets, read_label_sets
from selfattn.data.readers.phone_csv import PHONE_CSV_NAME, is_phone_csv, read_phone_csv
from selfattn.data.readers.stories import is_story_file, read_stories
from selfattn.data.readers.wav_csv import is_wav_csv, read_wav_csv
from selfattn.data.recipes import RECIPES
from selfattn.datatypes import DataError, DatasetSplits, Example, InputKind, TaskType
from selfattn.messages import not_a_file

_READERS: dict[str, Callable[[Path], list[Example]]] = {
    ".txt": read_tagged,
    ".conllu": read_conllu,
    ".csv": read_classification_csv,
    ".tsv": read_classification_csv,
    ".npz": read_npz,
    ".ts": read_ts,
    ".jsonl": read_label_sets,
}

#: What ``format`` may name: a file is read as if its name ended in ``.FORMAT``.
FORMATS = tuple(suffix[1:] for suffix in _READERS)


def load_dataset(
    name_or_path: str | Path,
    *,
    dev: str | Path | None = None,
    test: str | Path | None = None,
    conllu_tag: Literal["upos", "xpos"] = "upos",
    task: TaskType | None = None,
    dev_fraction: float = 0.0,
    seed: int = 0,
    format: str | None = None,
) -> DatasetSplits:
    """A registered recipe by name, or a user's file(s).

    For files, ``name_or_path`` is the training set; ``dev`` and ``test`` are optional
    further files (their splits stay empty otherwise). Files are read by extension:
    ``.txt`` (``word/TAG`` lines, or bAbI-style stories with questions:
    :mod:`~selfattn.data.readers.stories`), ``.conllu``, ``.csv`` / ``.tsv`` (``label,text``),
    ``.npz`` (vector sets), ``.ts`` (sktime time series), ``.jsonl`` (texts with label
    sets, a multilabel task: :mod:`~selfattn.data.readers.label_sets`) — unless
    ``task="seq2seq"``: then every file but a ``.jsonl`` holds ``source<TAB>target``
    lines (:func:`~selfattn.data.formats.text.read_parallel`), and a ``.jsonl`` file's
    (or a multilabel recipe's) label sets become targets in one canonical order
    (:func:`~selfattn.data.readers.label_sets.label_set_targets`). A ``.csv`` whose header is
    ``path,label`` (or a folder holding such a ``labels.csv``) lists WAV files instead,
    read as speech vectors (:func:`~selfattn.data.readers.wav_csv.read_wav_csv`; with
    ``task="seq2seq"`` the label is the space-separated target); one whose header is
    ``path,phones`` (or a folder holding such a ``phones.csv``) pairs each WAV file with
    a file of one phone label per 10 ms frame (token task,
    :func:`~selfattn.data.readers.phone_csv.read_phone_csv`).

    Args:
        task: the task the caller expects. Needed for seq2seq user data, whose labels
            look like a token task's (a ``label<TAB>text`` TSV is classification
            otherwise), and for regression (each label must then be a number); for a
            recipe or other files, a check.
        dev_fraction: user files without ``dev``: hold out this fraction of the training
            file as the dev split (seeded with ``seed``, stratified by label for a
            sequence task; ``dev_from_train`` is then set). 0 leaves dev empty. Recipes
            ignore it: their splits are fixed.
        seed: the seed of that hold-out.
        format: read every user file as if its name ended in ``.FORMAT`` (one of
            :data:`FORMATS`) instead of by its own extension.

    Raises:
        DataError: unknown name, missing file, unknown extension, malformed contents,
            files that disagree on the task or input kind, or a ``task`` that disagrees
            with the recipe or the files.
    """
    tasks = get_args(TaskType)
    if task is not None and task not in tasks:
        raise DataError(f"unknown task {task!r}; choose one of {', '.join(tasks)}")
    if isinstance(name_or_path, str) and name_or_path in RECIPES:
        recipe = RECIPES[name_or_path]
        if dev is not None or test is not None:
            raise DataError(f"recipe {name_or_path!r} has fixed splits; drop dev= / test=")
        if task == "seq2seq" and recipe.task == "multilabel":  # a label set as a sequence
            return label_set_targets(recipe.load(), check_unseen=False)
        if task is not None and task != recipe.task:
            raise DataError(f"recipe {name_or_path!r} is a {recipe.task} task, not {task}")
        return recipe.load()
    if format is not None and format not in FORMATS:
        raise DataError(f"unknown format {format!r}; choose one of {', '.join(FORMATS)}")
    train_path = Path(name_or_path)
    if not train_path.exists():
        names = ", ".join(sorted(RECIPES))
        raise DataError(f"{name_or_path}: neither a recipe ({names}) nor an existing file")
    train = _read_user_file(train_path, conllu_tag, task, format)
    found, kind = _kind_of(train, task, train_path, format)
    if task is not None and found != task:
        raise DataError(
            f"{train_path}: holds {found} data, not {task}"
            + (" (seq2seq files: source<TAB>target lines)" if task != "seq2seq" else "")
        )
    others: dict[str, list[Example]] = {}
    for split, path in (("dev", dev), ("test", test)):
        if path is None:
            others[split] = []
            continue
        others[split] = _read_user_file(Path(path), conllu_tag, task, format)
        if _kind_of(others[split], task, Path(path), format) != (found, kind):
            raise DataError(
                f"{path}: {split} file holds "
                f"{'/'.join(_kind_of(others[split], task, Path(path), format))} data, "
                f"but {train_path} holds {found}/{kind}"
            )
    held_out = dev is None and dev_fraction > 0
    if held_out:
        train, others["dev"] = dev_holdout(train, dev_fraction, seed, stratify=found == "sequence")
    splits = DatasetSplits(
        name=train_path.stem,
        task=found,
        input=kind,
        train=train,
        dev=others["dev"],
        test=others["test"],
        description=f"user data from {train_path}",
        extra={"train": str(train_path), "dev": str(dev or ""), "test": str(test or "")},
        dev_from_train=held_out,
    )
    suffix = train_path.suffix.lower() if format is None else f".{format}"
    if task == "seq2seq" and suffix == ".jsonl":  # label sets as sequences
        return label_set_targets(dataclasses.replace(splits, task="multilabel"), check_unseen=True)
    return splits


def _read_user_file(
    path: Path,
    conllu_tag: Literal["upos", "xpos"],
    task: TaskType | None,
    format: str | None = None,
) -> list[Example]:
    if path.is_dir() and (path / "labels.csv").is_file():
        path = path / "labels.csv"  # a folder of WAV files with its labels.csv
    elif path.is_dir() and (path / PHONE_CSV_NAME).is_file():
        path = path / PHONE_CSV_NAME  # a folder of WAV files with frame labels
    if path.is_dir():
        raise DataError(
            f"{path}: a folder, not a data file (a folder of WAV files holds labels.csv "
            f"or {PHONE_CSV_NAME})"
        )
    if not path.is_file():
        raise DataError(f"{path}: {not_a_file(path)}")
    suffix = path.suffix.lower() if format is None else f".{format}"
    if suffix == ".csv" and is_phone_csv(path):
        if task not in (None, "token"):
            raise DataError(
                f"{path}: path,phones rows are token data (a label per frame), not {task}"
            )
        examples = read_phone_csv(path)
    elif suffix == ".csv" and is_wav_csv(path):
        examples = read_wav_csv(path, seq2seq=task == "seq2seq")
    elif task == "seq2seq" and suffix != ".jsonl":  # .jsonl: label sets, as a sequence
        if suffix == ".npz":
            raise DataError(f"{path}: seq2seq user data is source<TAB>target text, not .npz")
        examples = read_parallel(path)
    elif suffix == ".conllu":
        examples = read_conllu(path, tag=conllu_tag)
    elif suffix == ".txt" and is_story_file(path):
        examples = read_stories(path)
    elif suffix in _READERS:
        examples = _READERS[suffix](path)
    else:
        known = ", ".join(_READERS)
        raise DataError(f"{path}: unknown file type {suffix!r} (known: {known})")
    if not examples:
        raise DataError(f"{path}: no examples in the file")
    if task == "regression":
        _check_numbers(examples)
    return examples


def _check_numbers(examples: list[Example]) -> None:
    """Refuse a regression example whose label is not one number, or one that a float32
    does not hold finitely (nan, ±inf, 1e39), naming its line."""
    for example in examples:
        label = example.label
        try:
            if not isinstance(label, str):
                raise ValueError
            value = float32_or_none(label)
        except ValueError:
            shown = label if isinstance(label, str) else " ".join(label)
            raise DataError(
                f"{example.source}: a regression label must be one number, got {shown!r}"
            ) from None
        if value is None:
            raise DataError(
                f"{example.source}: a regression label must be a finite number of at most "
                f"{FLOAT32_MAX:.2g} in size, got {label!r}"
            )


def _kind_of(
    examples: list[Example], task: TaskType | None, path: Path, format: str | None = None
) -> tuple[TaskType, InputKind]:
    """The task and input kind of user examples.

    A seq2seq label is a tuple of tokens, like a token task's labels, so seq2seq is never
    guessed from the data: only a stated ``task="seq2seq"`` gives it. A label set is a
    tuple too: its file type (``.jsonl``) says so.
    """
    kind: InputKind = "text" if examples[0].tokens is not None else "vectors"
    if task == "seq2seq":
        return "seq2seq", kind
    if (path.suffix.lower() if format is None else f".{format}") == ".jsonl":
        return "multilabel", kind
    found: TaskType = "sequence" if isinstance(examples[0].label, str) else "token"
    if task == "regression" and found == "sequence":
        return "regression", kind
    return found, kind
