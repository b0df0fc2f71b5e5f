"""Models built the way a task builds them, for the tests that need one without data."""

from __future__ import annotations

from typing import Any

from selfattn.models.option_groups import ModelOptions
from selfattn.models.registry import model_options
from selfattn.models.task_model import build_model


def with_options(options: ModelOptions, **changes: Any) -> ModelOptions:
    """``options`` with ``changes``, which may name another architecture (its options then
    keep what it reads; the rest must be unset, as a ``[model]`` table's)."""
    return model_options(**{**vars(options), **changes})


def build(config: ModelOptions, task: str, *, num_labels: int = 2, **inputs: Any) -> Any:
    """:func:`~selfattn.models.task_model.build_model` of ``config`` for ``task`` with
    ``num_labels`` labels; ``inputs`` are its other arguments (``feature_dim=3``,
    ``edge_dim=2`` …), and the kinds of input they leave out (words, characters, vectors)
    are absent."""
    absent = {"vocab_size": None, "char_vocab_size": None, "feature_dim": None}
    return build_model(config, task=task, num_labels=num_labels, **{**absent, **inputs})  # type: ignore[arg-type]
