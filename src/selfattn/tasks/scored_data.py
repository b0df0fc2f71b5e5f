"""What ``eval`` scores: a split of the run's own dataset, or any file a user gives in a
format ``selfattn train`` reads (:func:`~selfattn.data.load_dataset`), read with the run's
task type so that its vocabularies and labels apply.

A file is checked before any example is scored: its task type and input kind must be the
model's (a ``label,text`` CSV for a token model is refused), its vectors as wide as the
model's, and (label tasks, :mod:`selfattn.tasks.labelling`) every label one the run knows.
Each refusal is one line naming the file (and line); nothing is written anywhere.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from selfattn.data import DatasetSplits, Example, load_dataset
from selfattn.data.readers.loading import FORMATS
from selfattn.datatypes import DataError
from selfattn.messages import not_a_file

if TYPE_CHECKING:
    from selfattn.tasks.task import Task

__all__ = ["FORMATS", "SPLITS", "DataFile", "scored_examples"]

#: The splits of a run's dataset.
SPLITS = ("train", "dev", "test")

#: What a file of each task type holds, for a refusal.
_HOLDS = {
    "token": "a label per token",
    "sequence": "a label per input",
    "regression": "a number per input",
    "multilabel": "a set of labels per input",
}

#: Input kinds whose training examples carry edges, which no user file format holds.
_GRAPH_KINDS = ("graph", "molecule")


@dataclass(frozen=True)
class DataFile:
    """A user's labelled file to score.

    Attributes:
        path: the file (or a folder of WAV files with its ``labels.csv`` / ``phones.csv``).
        format: read it as if its name ended in ``.FORMAT`` (one of :data:`FORMATS`);
            ``None``: by its own extension.
    """

    path: Path
    format: str | None = None

    def __str__(self) -> str:
        return str(self.path)


def scored_examples(task: Task, scored: str | DataFile) -> tuple[list[Example], DatasetSplits]:
    """The examples to score as loading gives them (before subwords or cutting), and the
    splits they came in (whose ``extra`` says how targets were written): a split of the
    run's dataset read as training read it, or a user's file.

    Raises:
        ValueError: an unknown or empty split; a file that is missing, empty, malformed,
            of another task type or input kind, or of vectors of another width.
    """
    if isinstance(scored, DataFile):
        splits = read_data_file(task, scored)
        return splits.test, splits
    if scored not in SPLITS:
        raise ValueError(f"unknown split {scored!r}; choose train, dev or test")
    splits = task.load_splits()
    examples: list[Example] = getattr(splits, scored)
    if not examples:
        raise ValueError(f"dataset {task.config.data.dataset!r} has no {scored} split")
    return examples, splits


def read_data_file(task: Task, data: DataFile) -> DatasetSplits:
    """``data`` read as ``selfattn train`` reads a user's file for ``task``'s task type,
    all of it as the ``test`` split.

    Raises:
        DataError: see :func:`scored_examples`.
    """
    path, spec = data.path, task.spec
    assert spec is not None, "restore() the task first"
    if task.layout == "bits" or task.reader.get("kind") in _GRAPH_KINDS:
        what = "bit vectors" if task.layout == "bits" else f"{task.reader['kind']}s"
        raise DataError(
            f"{path}: this model reads {what}, and no file format of selfattn train holds "
            "them; score its dataset with --split"
        )
    if not path.exists():
        raise DataError(f"{path}: {not_a_file(path)}")
    # Read as its own task type (seq2seq data alone cannot tell it is one), so that a file
    # of another is named as such rather than misread.
    splits = load_dataset(
        path, task="seq2seq" if spec.task == "seq2seq" else None, format=data.format
    )
    if spec.task == "regression" and splits.task == "sequence":  # each label a number?
        splits = load_dataset(path, task="regression", format=data.format)
    if splits.task != spec.task:
        raise DataError(
            f"{path}: holds {_HOLDS.get(splits.task, splits.task)} ({splits.task} data), but "
            f"this is a {spec.task} model; give a file of the format it was trained on"
        )
    if splits.input != task.input:
        raise DataError(
            f"{path}: holds {splits.input} input, but this model reads {task.input} "
            f"(it was trained on {task.config.data.dataset})"
        )
    if spec.feature_dim is not None:
        for example in splits.train:
            assert example.features is not None  # vector input
            width = int(example.features.shape[-1])
            if width != spec.feature_dim:
                raise DataError(
                    f"{example.source}: vectors of {width} features; this model reads "
                    f"{spec.feature_dim} per vector"
                )
    return dataclasses.replace(splits, train=[], dev=[], test=splits.train)
