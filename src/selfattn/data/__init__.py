"""Data: recipes for real corpora, file readers, vocabularies and collation into batches.

The package is split by role:

* :mod:`.fetch` — downloading a recipe's files, verifying them by SHA-256, the cache;
* :mod:`.registry` and :mod:`.recipes` — the recipe table and one module per dataset
  family (importing :mod:`.recipes` fills the table);
* :mod:`.readers` — file formats, the loading of a user's own files, a user's input to predict on;
* :mod:`.batching` — splits, length fitting, and collation into padded batches;
* :mod:`.types`, :mod:`.vocab`, :mod:`.specials` — what all of them share.

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

import importlib
from typing import TYPE_CHECKING

from selfattn.data.batching.collate import Collator, batches
from selfattn.data.fetch.cache import cache_root, extract_member, fetch_member, fetch_pypi_file
from selfattn.data.fetch.debian import fetch_deb, fetch_deb_members
from selfattn.data.fetch.sources import (
    DebianPackage,
    DebianSource,
    GeneratedSource,
    PyPISource,
    Source,
)
from selfattn.data.formats.numeric import read_npz, read_ts
from selfattn.data.formats.text import (
    read_classification_csv,
    read_conllu,
    read_parallel,
    read_tagged,
    tokenize,
)
from selfattn.data.registry import Recipe
from selfattn.data.vocab import (
    CharVocabulary,
    LabelVocabulary,
    Vocabulary,
    bpe_retokenize,
    bpe_vocabulary,
    train_bpe,
)
from selfattn.datatypes import Batch, DataError, DatasetSplits, Example, InputKind, TaskType
from selfattn.specials import IGNORE_INDEX

# Names whose modules import every recipe are imported on first use, so that importing
# one module of this package (the registry, a reader) does not load all the recipes.
if TYPE_CHECKING:  # type checkers see plain imports (and no __getattr__ that hides typos)
    from selfattn.data.readers.loading import load_dataset
    from selfattn.data.recipes import RECIPES
    from selfattn.data.recipes.hull import generate_hull_examples, hull_metrics, hull_target
    from selfattn.data.recipes.listops import ListOpsSpec, evaluate_listops, generate_listops
else:
    _FROM_RECIPES = {
        "RECIPES": "selfattn.data.recipes",
        "load_dataset": "selfattn.data.readers.loading",
        "generate_hull_examples": "selfattn.data.recipes.hull",
        "hull_metrics": "selfattn.data.recipes.hull",
        "hull_target": "selfattn.data.recipes.hull",
        "ListOpsSpec": "selfattn.data.recipes.listops",
        "evaluate_listops": "selfattn.data.recipes.listops",
        "generate_listops": "selfattn.data.recipes.listops",
    }

    def __getattr__(name: str) -> object:
        if name not in _FROM_RECIPES:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(_FROM_RECIPES[name]), name)
        globals()[name] = value  # the next lookup finds it without this function
        return value


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
