"""selfattn: self-attention models on any vector set — text, speech, images, graphs."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from selfattn import runtime

# Before anything imports torch: OpenMP reads its spin setting once, when torch loads it
# (selfattn.runtime explains why and what; a variable you set yourself is left alone).
runtime.prepare_environment()

from selfattn.attention import AdditiveScore, MultiHeadAttention, attention  # noqa: E402

if TYPE_CHECKING:
    from selfattn.api import Model, Run, load

__version__ = "0.1.0"

__all__ = [
    "AdditiveScore",
    "Model",
    "MultiHeadAttention",
    "Run",
    "__version__",
    "attention",
    "load",
    "train",
]

#: The Python API (:mod:`selfattn.api`), loaded on first use so that ``import selfattn``
#: stays as cheap as the attention layer it exports.
_LAZY = {"load": "selfattn.api", "Model": "selfattn.api", "Run": "selfattn.api"}


def __getattr__(name: str) -> Any:
    """``selfattn.load`` / ``Model`` / ``Run`` from :mod:`selfattn.api`; ``selfattn.train``
    is the training package, which is callable as :func:`selfattn.api.train` (its
    ``_CallablePackage`` says why)."""
    if name == "train":
        return importlib.import_module("selfattn.train")
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'selfattn' has no attribute {name!r}")
