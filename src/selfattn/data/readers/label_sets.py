"""Multi-label data (lecture 001, "the machine decides how many labels"): a user's
``.jsonl`` file of texts with label sets, and a label set written as a seq2seq target.

File format — one JSON object a line, blank lines skipped::

    {"text": "The company said it would sell shares .", "labels": ["modal", "past"]}
    {"text": "Stocks fell .", "labels": ["past"]}
    {"text": "Buy them .", "labels": ["<none>"]}

``labels`` is a non-empty list of distinct strings; a set where no label applies is
written ``["<none>"]`` (:data:`~selfattn.specials.NO_LABELS`), so that a forgotten
label list (``[]``) is an error rather than a silent "none of them". A label may not
contain white space (a seq2seq target splits on it) or ``,`` (a prediction lists the set
with it). Every problem is a one-line :class:`DataError` naming the file and line.

As seq2seq (:func:`label_set_targets`), a set becomes its labels in one canonical order:
by frequency in the training split (most frequent first, ties alphabetical; labels
unseen in training after those, alphabetical), the empty set the one token ``<none>``.
"""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

from selfattn.data.formats.text import numbered_lines, tokenize
from selfattn.datatypes import DataError, DatasetSplits, Example
from selfattn.specials import NO_LABELS

#: The characters a label may not contain, and why (the message's reason).
SEPARATORS = {",": "',' separates the labels of a prediction"}
#: What :attr:`DatasetSplits.extra` says of splits whose seq2seq targets are label sets.
LABEL_SET_TARGETS = "label-set"


def read_label_sets(path: str | Path) -> list[Example]:
    """Read a ``.jsonl`` multi-label file (module docstring): text in, a label set out.

    Returns:
        Examples whose ``label`` is the sorted tuple of their labels (``()`` for
        ``["<none>"]``).

    Raises:
        DataError: ``path:line: problem`` for a line that is not a JSON object, a missing
            or empty text, labels that are not a non-empty list of distinct strings, a
            label with a separator in it, ``<none>`` beside other labels.
    """
    path = Path(path)
    examples = []
    for lineno, line in numbered_lines(path):
        if not line.strip():
            continue
        where = f"{path}:{lineno}"
        try:
            record = json.loads(line)
        except json.JSONDecodeError as err:
            raise DataError(f"{where}: not a JSON object ({err.msg})") from None
        if not isinstance(record, dict) or not {"text", "labels"} <= set(record):
            raise DataError(f'{where}: expected an object with "text" and "labels"')
        text = record["text"]
        if not isinstance(text, str) or not tokenize(text):
            raise DataError(f'{where}: "text" must be a non-empty string')
        examples.append(
            Example(tuple(tokenize(text)), None, _label_set(record["labels"], where), where)
        )
    return examples


def _label_set(labels: object, where: str) -> tuple[str, ...]:
    """The sorted labels of one line's ``"labels"`` (``()`` for ``["<none>"]``)."""
    if not isinstance(labels, list) or not all(isinstance(label, str) for label in labels):
        raise DataError(f'{where}: "labels" must be a list of strings')
    if not labels:
        raise DataError(
            f'{where}: empty label set; write "labels": ["{NO_LABELS}"] when no label applies'
        )
    for label in labels:
        check_label(label, where)
    repeated = [label for label, count in Counter(labels).items() if count > 1]
    if repeated:
        raise DataError(
            f"{where}: label {repeated[0]!r} is listed twice; a label set has each once"
        )
    if NO_LABELS in labels:
        if len(labels) > 1:
            raise DataError(f"{where}: {NO_LABELS!r} (no label applies) beside other labels")
        return ()
    return tuple(sorted(labels))


def check_label(label: str, where: str) -> None:
    """Refuse a label that is empty or holds a separator, in one line.

    Raises:
        DataError: ``where: label ... contains ...``.
    """
    if not label.strip():
        raise DataError(f"{where}: empty label")
    if any(character.isspace() for character in label):
        raise DataError(
            f"{where}: label {label!r} contains white space, which separates the labels of "
            "a seq2seq target"
        )
    for separator, reason in SEPARATORS.items():
        if separator in label:
            raise DataError(f"{where}: label {label!r} contains {separator!r}; {reason}")


def canonical_order(train: Iterable[Example]) -> list[str]:
    """The training labels by frequency, most frequent first, ties alphabetical."""
    counts = Counter(label for example in train for label in example.label)
    return sorted(counts, key=lambda label: (-counts[label], label))


def as_target(labels: Iterable[str], order: list[str]) -> tuple[str, ...]:
    """A label set as a seq2seq target: its labels in ``order`` (others after, sorted),
    each once; the empty set as ``("<none>",)``."""
    rank = {label: i for i, label in enumerate(order)}
    unique = sorted(set(labels), key=lambda label: (rank.get(label, len(rank)), label))
    return tuple(unique) if unique else (NO_LABELS,)


def decoded_set(tokens: Iterable[str]) -> frozenset[str]:
    """The label set a seq2seq model wrote: its tokens, duplicates and ``<none>`` dropped."""
    return frozenset(token for token in tokens if token != NO_LABELS)


def label_set_targets(splits: DatasetSplits, *, check_unseen: bool) -> DatasetSplits:
    """Multi-label ``splits`` as seq2seq: each set written in :func:`canonical_order`.

    Args:
        splits: ``task == "multilabel"``.
        check_unseen: a user's files: a dev or test label that the training file lacks
            is an error (it could never be written; a recipe's label set is fixed).

    Raises:
        DataError: with ``check_unseen``, ``file:line: label ... never occurs in the
            training file``.
    """
    order = canonical_order(splits.train)
    if check_unseen:
        known = set(order)
        for example in ([] if splits.dev_from_train else splits.dev) + splits.test:
            for label in example.label:
                if label not in known:
                    raise DataError(
                        f"{example.source}: label {label!r} never occurs in the training file "
                        f"{splits.extra.get('train', splits.name)}"
                    )

    def convert(part: list[Example]) -> list[Example]:
        return [dataclasses.replace(e, label=as_target(e.label, order)) for e in part]

    return dataclasses.replace(
        splits,
        task="seq2seq",
        train=convert(splits.train),
        dev=convert(splits.dev),
        test=convert(splits.test),
        extra={**splits.extra, "targets": LABEL_SET_TARGETS, "label_order": " ".join(order)},
    )


__all__ = [
    "LABEL_SET_TARGETS",
    "as_target",
    "canonical_order",
    "check_label",
    "decoded_set",
    "label_set_targets",
    "read_label_sets",
]
