"""Sequences against a length limit: refuse or cut at load time, slide windows at inference.

A model is built for ``data.max_len`` positions. What the data do with that limit is
decided once, when they are loaded, before any training (:func:`fit_splits`): a longer
example is refused with its ``file:line``, or cut to its first ``max_len`` positions. At
inference a model whose positions end somewhere (a learned table) reads a longer input of
a token task in overlapping windows (:func:`window_spans`).
"""

from __future__ import annotations

import dataclasses
from bisect import bisect_left, bisect_right
from typing import Literal

import numpy as np

from selfattn.datatypes import DataError, DatasetSplits, Example, TaskType
from selfattn.messages import plural

Overlong = Literal["refuse", "cut"]


def unit(example: Example) -> str:
    """What the positions of ``example`` are called in messages: tokens or vectors."""
    return "tokens" if example.tokens is not None else "vectors"


def slice_example(example: Example, start: int, stop: int, task: TaskType) -> Example:
    """Positions ``start … stop - 1`` of ``example`` as an example of their own.

    A token task's labels are sliced with the positions; a seq2seq target is kept whole
    (cut it with :func:`cut_target`); a graph keeps the edges between kept nodes,
    renumbered from 0.
    """
    tokens = None if example.tokens is None else example.tokens[start:stop]
    features = None if example.features is None else example.features[start:stop]
    label = example.label
    if task == "token" and not isinstance(label, str):
        label = label[start:stop]
    edges, edge_features = example.edges, example.edge_features
    if edges is not None:
        pairs = np.asarray(edges).reshape(-1, 2)
        inside = ((pairs >= start) & (pairs < stop)).all(axis=1)
        edges = pairs[inside] - start
        if edge_features is not None:
            edge_features = np.asarray(edge_features)[inside]
    return dataclasses.replace(
        example,
        tokens=tokens,
        features=features,
        label=label,
        edges=edges,
        edge_features=edge_features,
    )


def cut_target(example: Example, max_len: int, *, pointer: bool = False) -> Example:
    """A seq2seq example with its target cut to ``max_len`` tokens.

    Raises:
        DataError: a pointer target (source positions) points past the source, which
            cutting it would make meaningless.
    """
    if pointer:
        beyond = [t for t in example.label if t.isdigit() and int(t) >= len(example)]
        if beyond:
            raise DataError(
                f"{example.source}: cannot cut: its target points at source position "
                f"{beyond[0]}, past data.max_len = {len(example)} (raise data.max_len)"
            )
    if len(example.label) <= max_len:
        return example
    return dataclasses.replace(example, label=tuple(example.label[:max_len]))


def fit_examples(
    examples: list[Example],
    max_len: int,
    overlong: Overlong,
    task: TaskType,
    *,
    pointer: bool = False,
) -> tuple[list[Example], int]:
    """``(examples, number cut)``: every example within ``max_len`` positions (and, for
    seq2seq, target tokens), refusing or cutting the longer ones.

    Raises:
        DataError: ``overlong="refuse"`` and an example is longer, naming its source:
            ``file:line: N tokens, longer than data.max_len = M (…)``.
    """
    out, cut = [], 0
    for example in examples:
        target = len(example.label) if task == "seq2seq" else 0
        if len(example) <= max_len and target <= max_len:
            out.append(example)
            continue
        if overlong == "refuse":
            what = (
                f"{len(example)} {unit(example)}"
                if len(example) > max_len
                else f"a target of {target} tokens"
            )
            raise DataError(
                f"{example.source}: {what}, longer than data.max_len = {max_len} "
                '(raise data.max_len or set data.overlong = "cut")'
            )
        shorter = slice_example(example, 0, max_len, task)
        if task == "seq2seq":
            shorter = cut_target(shorter, max_len, pointer=pointer)
        out.append(shorter)
        cut += 1
    return out, cut


def fit_splits(
    splits: DatasetSplits, max_len: int, overlong: Overlong, *, pointer: bool = False
) -> int:
    """Apply :func:`fit_examples` to train, dev and test in place; returns how many were
    cut (0 with ``overlong="refuse"``, which raises instead)."""
    total = 0
    for name in ("train", "dev", "test"):
        examples, cut = fit_examples(
            getattr(splits, name), max_len, overlong, splits.task, pointer=pointer
        )
        setattr(splits, name, examples)
        total += cut
    return total


def cut_note(cut: int, max_len: int) -> str:
    """The line that tells the user how many examples :func:`fit_splits` cut."""
    return f'data.overlong = "cut": {plural(cut, "example")} cut to data.max_len = {max_len}'


def window_spans(length: int, size: int) -> list[tuple[int, int, int]]:
    """Windows of ``size`` positions over a sequence of ``length``, half overlapping.

    Returns:
        ``(start, keep_from, keep_to)`` per window: the window covers ``start … start +
        size - 1`` and is the one that predicts positions ``keep_from … keep_to - 1`` —
        those where it sits most central, i.e. farthest from either of its edges (the
        context on both sides is widest there). The kept spans tile ``0 … length - 1``.
    """
    if size < 1:
        raise ValueError(f"size must be >= 1, got {size}")
    if length <= size:
        return [(0, 0, length)]
    stride = max(size // 2, 1)
    starts = [*range(0, length - size, stride), length - size]
    spans: list[tuple[int, int, int]] = []
    for position in range(length):
        covering = starts[bisect_left(starts, position - size + 1) : bisect_right(starts, position)]
        best = max(covering, key=lambda s: min(position - s, s + size - 1 - position))
        if spans and spans[-1][0] == best:
            spans[-1] = (best, spans[-1][1], position + 1)
        else:
            spans.append((best, position, position + 1))
    return spans
