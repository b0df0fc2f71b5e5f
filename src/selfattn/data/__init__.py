"""Data: recipes for real corpora, file readers, vocabularies and collation into batches.

Typical use::

    splits = load_dataset("pos-wsj")  # or a path: "train.txt", dev="dev.txt"
    pairs = load_dataset("translate-de-en")  # seq2seq; own data: load_dataset(
    #     "train.tsv", dev="dev.tsv", task="seq2seq") reads source<TAB>target lines
    vocab = Vocabulary.build((e.tokens for e in splits.train), min_freq=2)
    labels = LabelVocabulary.for_splits(splits)  # the task's whole label set
    collate = Collator(vocab, CharVocabulary.build(...), labels, splits.task, max_len=512)
    for group in batches(splits.train, 32, shuffle=True, seed=epoch):
        batch = collate(group)
"""

from __future__ import annotations

from selfattn.data.cache import cache_root, extract_member, fetch_member, fetch_pypi_file
from selfattn.data.collate import IGNORE_INDEX, Collator, batches
from selfattn.data.debian import fetch_deb, fetch_deb_members
from selfattn.data.formats import (
    read_classification_csv,
    read_conllu,
    read_npz,
    read_parallel,
    read_tagged,
    read_ts,
    tokenize,
)
from selfattn.data.hull import generate_hull_examples, hull_metrics, hull_target
from selfattn.data.listops import ListOpsSpec, evaluate_listops, generate_listops
from selfattn.data.loading import load_dataset
from selfattn.data.recipes import RECIPES, Recipe
from selfattn.data.sources import DebianPackage, DebianSource, GeneratedSource, PyPISource, Source
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
    "DebianPackage",
    "DebianSource",
    "Example",
    "GeneratedSource",
    "InputKind",
    "LabelVocabulary",
    "ListOpsSpec",
    "PyPISource",
    "Recipe",
    "Source",
    "TaskType",
    "Vocabulary",
    "batches",
    "bpe_retokenize",
    "bpe_vocabulary",
    "cache_root",
    "evaluate_listops",
    "extract_member",
    "fetch_deb",
    "fetch_deb_members",
    "fetch_member",
    "fetch_pypi_file",
    "generate_hull_examples",
    "generate_listops",
    "hull_metrics",
    "hull_target",
    "load_dataset",
    "read_classification_csv",
    "read_conllu",
    "read_npz",
    "read_parallel",
    "read_tagged",
    "read_ts",
    "tokenize",
    "train_bpe",
]
