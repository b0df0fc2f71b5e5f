"""The data types' documented import path (``from selfattn.data.types import Batch``): they
live in :mod:`selfattn.datatypes`, below both the models and the data, which share them."""

from __future__ import annotations

from selfattn.datatypes import (
    Batch,
    DataError,
    DatasetSplits,
    Example,
    InputKind,
    Subwords,
    TaskType,
    moved,
)

__all__ = [
    "Batch",
    "DataError",
    "DatasetSplits",
    "Example",
    "InputKind",
    "Subwords",
    "TaskType",
    "moved",
]
