"""Collation: a list of vector sets of different sizes → one padded :class:`Batch`.

Padding is what the key-padding mask exists for: attention must not look at the filler
positions, and the loss must not score them (their labels are
:data:`~selfattn.specials.IGNORE_INDEX`, the value
``torch.nn.functional.cross_entropy`` ignores by default).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from selfattn.data.vocab import CharVocabulary, LabelVocabulary, Vocabulary
from selfattn.datatypes import Batch, DataError, Example, TaskType
from selfattn.specials import IGNORE_INDEX, NO_LABEL, PAD_ID


@dataclass(eq=False)
class Collator:
    """Turns ``list[Example]`` into a :class:`Batch`.

    Attributes:
        vocab: token vocabulary for text input (``None`` for vector input).
        char_vocab: character vocabulary, to add ``char_ids`` for text input, or ``None``.
        label_vocab: output labels.
        task: ``"token"`` (one label per position), ``"sequence"`` (one per example),
            ``"regression"`` (a number per example) or ``"multilabel"`` (a set per
            example: ``labels`` is ``(B, C)`` multi-hot floats).
        max_len: the longest example the model accepts (e.g. its number of learned
            positions); ``None`` for no limit. Longer examples are an error, not silently
            cut, so an evaluation never scores a truncated sentence.
    """

    vocab: Vocabulary | None
    char_vocab: CharVocabulary | None
    label_vocab: LabelVocabulary
    task: TaskType
    max_len: int | None = None

    def __call__(self, examples: Sequence[Example]) -> Batch:
        """Pad ``examples`` to the longest one.

        Returns:
            A :class:`Batch` with ``key_padding_mask`` ``(B, L)`` (True at padding) and
            ``labels`` ``(B, L)`` with ``IGNORE_INDEX`` at padding (token task) or ``(B,)``.

        Raises:
            DataError: an example is empty, longer than ``max_len``, has a label count
                that differs from its length, or carries a label unseen in training.
        """
        if not examples:
            raise ValueError("cannot collate an empty list of examples")
        for example in examples:
            self._check_length(example)
        lengths = torch.tensor([len(e) for e in examples])
        max_len = int(lengths.max())
        # (B, L): position index ≥ length ⇒ padding.
        mask = torch.arange(max_len)[None, :] >= lengths[:, None]

        token_ids = char_ids = features = None
        if all(e.tokens is not None for e in examples):
            token_ids, char_ids = self._text(examples, max_len)
        elif all(e.features is not None for e in examples):
            features = _pad_features(examples, max_len)
        else:
            raise ValueError("a batch mixes text examples and vector examples")
        edge_index, edge_attr = _edges(examples, max_len)
        labels = self._labels(examples, max_len)
        return Batch(
            token_ids, char_ids, features, mask, labels, edge_index=edge_index, edge_attr=edge_attr
        )

    def _check_length(self, example: Example) -> None:
        length = len(example)
        where = example.source or "an example"
        if length == 0:
            raise DataError(f"{where}: empty example (length 0)")
        if self.max_len is not None and length > self.max_len:
            raise DataError(
                f"{where}: example has length {length}, longer than max_len {self.max_len}"
            )

    def _text(
        self, examples: Sequence[Example], max_len: int
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        if self.vocab is None:
            raise ValueError("text examples need a Vocabulary (vocab=None was given)")
        token_ids = torch.full((len(examples), max_len), PAD_ID, dtype=torch.long)  # (B, L)
        for b, example in enumerate(examples):
            assert example.tokens is not None
            token_ids[b, : len(example)] = torch.tensor(self.vocab.encode(example.tokens))
        if self.char_vocab is None:
            return token_ids, None
        width = self.char_vocab.max_word_len
        char_ids = torch.full((len(examples), max_len, width), PAD_ID, dtype=torch.long)
        for b, example in enumerate(examples):
            assert example.tokens is not None
            char_ids[b, : len(example)] = torch.tensor(self.char_vocab.encode(example.tokens))
        return token_ids, char_ids  # (B, L), (B, L, C)

    def _labels(self, examples: Sequence[Example], max_len: int) -> torch.Tensor:
        encode = self.label_vocab.encode
        if self.task == "regression":
            return torch.tensor([_number(e) for e in examples], dtype=torch.float32)  # (B,)
        if self.task == "sequence":
            ids = []
            for e in examples:
                if not isinstance(e.label, str):
                    raise DataError(f"{e.source}: a sequence task needs one label per example")
                ids.append(encode(e.label, e.source))
            return torch.tensor(ids, dtype=torch.long)  # (B,)
        if self.task == "multilabel":
            return self._label_sets(examples)
        labels = torch.full((len(examples), max_len), IGNORE_INDEX, dtype=torch.long)
        for b, e in enumerate(examples):
            if isinstance(e.label, str) or len(e.label) != len(e):
                count = 1 if isinstance(e.label, str) else len(e.label)
                raise DataError(
                    f"{e.source}: a token task needs one label per position, got {count} "
                    f"label(s) for length {len(e)}"
                )
            labels[b, : len(e)] = torch.tensor(
                [IGNORE_INDEX if t == NO_LABEL else encode(t, e.source) for t in e.label]
            )
        return labels  # (B, L)

    def _label_sets(self, examples: Sequence[Example]) -> torch.Tensor:
        """``(B, C)`` float: 1 where the example's set holds label c (multilabel task)."""
        targets = torch.zeros(len(examples), len(self.label_vocab))
        for b, e in enumerate(examples):
            if isinstance(e.label, str):
                raise DataError(f"{e.source}: a multilabel task needs a set of labels")
            for label in e.label:
                targets[b, self.label_vocab.encode(label, e.source)] = 1.0
        return targets


def _number(example: Example) -> float:
    """A regression example's target."""
    try:
        return float(example.label)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise DataError(
            f"{example.source}: a regression target must be one number, got {example.label!r}"
        ) from None


def _edges(
    examples: Sequence[Example], max_len: int
) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    """Graph examples' edges over the flattened ``b·max_len + i`` positions, and their
    features: ``((2, E) long, (E, D_e) float or None)``; ``(None, None)`` without graphs."""
    with_edges = [e.edges is not None for e in examples]
    if not any(with_edges):
        return None, None
    if not all(with_edges):
        raise DataError(f"{examples[0].source}: a batch mixes graphs and sets without edges")
    if len({e.edge_features is None for e in examples}) > 1:
        raise DataError(f"{examples[0].source}: only some graphs of the batch have edge features")
    index, attr = [], []
    for b, example in enumerate(examples):
        assert example.edges is not None
        edges = np.asarray(example.edges)
        if edges.ndim != 2 or edges.shape[1] != 2:
            raise DataError(f"{example.source}: edges must have shape (E, 2), got {edges.shape}")
        if edges.size and (edges.min() < 0 or edges.max() >= len(example)):
            raise DataError(
                f"{example.source}: an edge refers to a node outside 0..{len(example) - 1}"
            )
        index.append(torch.from_numpy(edges.astype(np.int64)).T + b * max_len)
        if example.edge_features is not None:
            if example.edge_features.shape[0] != edges.shape[0]:
                raise DataError(
                    f"{example.source}: {example.edge_features.shape[0]} edge feature rows "
                    f"for {edges.shape[0]} edges"
                )
            attr.append(torch.from_numpy(np.asarray(example.edge_features, dtype=np.float32)))
    if attr and len({a.shape[1] for a in attr}) > 1:
        raise DataError(f"{examples[0].source}: edge feature sizes differ within a batch")
    return torch.cat(index, dim=1), torch.cat(attr) if attr else None


def _pad_features(examples: Sequence[Example], max_len: int) -> torch.Tensor:
    dims = {e.features.shape[1] for e in examples if e.features is not None}
    if len(dims) != 1:
        sources = ", ".join(e.source for e in examples[:3])
        raise DataError(f"{sources}: feature sizes differ within a batch ({sorted(dims)})")
    out = np.zeros((len(examples), max_len, dims.pop()), dtype=np.float32)  # (B, L, F)
    for b, example in enumerate(examples):
        assert example.features is not None
        out[b, : len(example)] = example.features
    return torch.from_numpy(out)


def batches(
    examples: Sequence[Example],
    batch_size: int,
    *,
    shuffle: bool,
    seed: int = 0,
    bucket_batches: int = 50,
) -> list[list[Example]]:
    """Group ``examples`` into batches; every example lands in exactly one batch.

    With ``shuffle``, the examples are shuffled with ``seed``, cut into chunks of
    ``bucket_batches × batch_size``, each chunk is sorted by length (so a batch holds
    similar lengths and little padding) and cut into batches, and the batch order is
    shuffled. The result depends only on ``seed``. Without ``shuffle`` the data order is
    kept (predictions line up with the file).
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be ≥ 1, got {batch_size}")
    order = list(range(len(examples)))
    if not shuffle:
        return [
            [examples[i] for i in order[s : s + batch_size]]
            for s in range(0, len(order), batch_size)
        ]
    rng = random.Random(seed)
    rng.shuffle(order)
    chunk = batch_size * bucket_batches
    groups: list[list[int]] = []
    for start in range(0, len(order), chunk):
        ranked = sorted(order[start : start + chunk], key=lambda i: len(examples[i]))
        groups.extend(ranked[s : s + batch_size] for s in range(0, len(ranked), batch_size))
    rng.shuffle(groups)
    return [[examples[i] for i in group] for group in groups]
