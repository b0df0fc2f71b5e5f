"""Collation for sequence-to-sequence examples: source set in, target sequence out.

Teacher forcing (lecture 001 §Training): the decoder reads the *gold* previous token and
predicts the next, so a target y₁ … yₙ becomes

    target_in  = BOS y₁ … yₙ
    target_out = y₁ … yₙ EOS

padded per batch (``IGNORE_INDEX`` in ``target_out`` is ignored by the loss). Ids follow
one convention in every output space (:mod:`selfattn.specials`): ``<pad>`` 0,
``<unk>`` 1, ``<bos>`` 2, ``<eos>`` 3.

Three target kinds, matching the model's output layer:

* ``vocab`` — target tokens looked up in the target vocabulary;
* ``pointer`` — target tokens are source positions ("0", "1", …), id ``4 + j``;
* ``copy`` — as ``vocab``, but each example's source words missing from the target
  vocabulary get temporary ids ``V, V + 1, …`` (the extended vocabulary of the
  pointer-generator), so a target word that only the source knows can still be scored.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import torch
from torch import Tensor

from selfattn.data.vocab import Vocabulary
from selfattn.datatypes import DataError, Example, moved
from selfattn.specials import (
    BOS,
    BOS_ID,
    EOS,
    EOS_ID,
    IGNORE_INDEX,
    NUM_SPECIALS,
    PAD_ID,
    UNK,
    UNK_ID,
)

TargetKind = Literal["vocab", "pointer", "copy"]


def target_vocabulary(
    sequences: Iterable[Sequence[str]], *, min_freq: int = 1, max_size: int | None = None
) -> Vocabulary:
    """A vocabulary with ``<pad> <unk> <bos> <eos>`` at ids 0–3, then the training tokens
    seen ``min_freq`` times, most frequent first."""
    counted = Vocabulary.build(sequences, min_freq=min_freq, max_size=max_size)
    return Vocabulary([BOS, EOS, *counted.decode(range(2, len(counted)))])


@dataclass
class Seq2SeqBatch:
    """Padded tensors for one teacher-forced step.

    Attributes:
        source: ``(B, S)`` long token ids, or ``(B, S, F)`` float vectors.
        source_padding: ``(B, S)`` bool, True at padding.
        target_in: ``(B, T)`` long, BOS then the target (``PAD_ID`` after its end).
        target_out: ``(B, T)`` long, the target then EOS (``IGNORE_INDEX`` after).
        target_padding: ``(B, T)`` bool, True at padding.
        copy_ids: ``(B, S)`` long, each source token in the extended vocabulary (copy).
        num_extended: the batch's largest number of out-of-vocabulary source words.
        extended: per example, the words behind ids ``V, V + 1, …`` (copy).
        references: per example, the gold target tokens (for BLEU and exact match).
    """

    source: Tensor
    source_padding: Tensor
    target_in: Tensor
    target_out: Tensor
    target_padding: Tensor
    copy_ids: Tensor | None = None
    num_extended: int = 0
    extended: list[list[str]] = field(default_factory=list)
    references: list[tuple[str, ...]] = field(default_factory=list)

    @property
    def labels(self) -> Tensor:
        """``target_out``: what the loss scores (the training loop counts its real ids)."""
        return self.target_out

    @property
    def num_tokens(self) -> int:
        """Real source plus target positions (for tokens/s)."""
        return int((~self.source_padding).sum() + (~self.target_padding).sum())

    def to(self, device: torch.device | str, *, non_blocking: bool = False) -> Seq2SeqBatch:
        """The same batch on ``device`` (``non_blocking``: :func:`selfattn.datatypes.moved`)."""

        def move(t: Tensor) -> Tensor:
            return moved(t, device, non_blocking)

        return Seq2SeqBatch(
            move(self.source),
            move(self.source_padding),
            move(self.target_in),
            move(self.target_out),
            move(self.target_padding),
            None if self.copy_ids is None else move(self.copy_ids),
            self.num_extended,
            self.extended,
            self.references,
        )


class Seq2SeqCollator:
    """``list[Example]`` (source set, target tokens) → :class:`Seq2SeqBatch`.

    Args:
        source_vocab: for text sources; ``None`` for vector sources.
        target_vocab: from :func:`target_vocabulary`; ``None`` for pointer targets.
        target: ``"vocab"``, ``"pointer"`` or ``"copy"``.
        max_source_len: longest source accepted (longer is an error, never cut).
        max_target_len: longest target accepted (EOS not counted).
    """

    def __init__(
        self,
        source_vocab: Vocabulary | None,
        target_vocab: Vocabulary | None,
        *,
        target: TargetKind = "vocab",
        max_source_len: int | None = None,
        max_target_len: int | None = None,
    ) -> None:
        if target != "pointer" and target_vocab is None:
            raise ValueError(f"target kind {target!r} needs a target vocabulary")
        if target_vocab is not None and target_vocab.decode([BOS_ID, EOS_ID]) != [BOS, EOS]:
            raise ValueError("the target vocabulary must hold <bos>, <eos> at ids 2, 3")
        if target == "copy" and source_vocab is None:
            raise ValueError("copying needs text sources (a source vocabulary)")
        self.source_vocab = source_vocab
        self.target_vocab = target_vocab
        self.target = target
        self.max_source_len = max_source_len
        self.max_target_len = max_target_len

    def __call__(self, examples: Sequence[Example]) -> Seq2SeqBatch:
        """Pad ``examples`` into one batch.

        Raises:
            DataError: an empty source or target, one longer than allowed, a pointer
                target that is not a source position — naming the example's origin.
        """
        if not examples:
            raise ValueError("cannot collate an empty list of examples")
        targets = [self._check(example) for example in examples]
        batch, source_len = len(examples), max(len(e) for e in examples)
        target_len = max(len(t) for t in targets) + 1
        source_padding = (
            torch.arange(source_len)[None, :] >= torch.tensor([len(e) for e in examples])[:, None]
        )
        source = self._sources(examples, source_len)
        copy_ids, extended = self._copy_ids(examples, source_len)
        target_in = torch.full((batch, target_len), PAD_ID, dtype=torch.long)
        target_out = torch.full((batch, target_len), IGNORE_INDEX, dtype=torch.long)
        for b, (example, tokens) in enumerate(zip(examples, targets, strict=True)):
            ids = self.encode_target(tokens, example, extended[b] if extended else None)
            n = len(ids)
            target_in[b, 0] = BOS_ID
            target_in[b, 1 : n + 1] = torch.tensor(ids, dtype=torch.long)
            target_out[b, :n] = torch.tensor(ids, dtype=torch.long)
            target_out[b, n] = EOS_ID
        return Seq2SeqBatch(
            source,
            source_padding,
            target_in,
            target_out,
            target_out == IGNORE_INDEX,
            copy_ids,
            max((len(words) for words in extended), default=0),
            extended,
            [tuple(t) for t in targets],
        )

    def encode_target(
        self, tokens: Sequence[str], example: Example, extended: list[str] | None = None
    ) -> list[int]:
        """Output ids of one target (no BOS / EOS)."""
        if self.target == "pointer":
            ids = []
            for token in tokens:
                if not token.isdigit() or int(token) >= len(example):
                    raise DataError(
                        f"{example.source or 'an example'}: pointer target {token!r} is not a "
                        f"source position 0…{len(example) - 1}"
                    )
                ids.append(NUM_SPECIALS + int(token))
            return ids
        assert self.target_vocab is not None
        ids = self.target_vocab.encode(tokens)
        if extended:
            size = len(self.target_vocab)
            slot = {word: size + i for i, word in enumerate(extended)}
            ids = [
                slot.get(token, UNK_ID) if i == UNK_ID else i
                for token, i in zip(tokens, ids, strict=True)
            ]
        return ids

    def decode_target(self, ids: Sequence[int], extended: Sequence[str] = ()) -> list[str]:
        """Tokens of output ids (stopping at EOS; specials dropped)."""
        words: list[str] = []
        for i in ids:
            if i == EOS_ID:
                break
            if i in (PAD_ID, BOS_ID):
                continue
            if self.target == "pointer":
                words.append(str(i - NUM_SPECIALS) if i >= NUM_SPECIALS else UNK)
                continue
            assert self.target_vocab is not None
            size = len(self.target_vocab)
            if i >= size:
                words.append(extended[i - size] if i - size < len(extended) else UNK)
            else:
                words.extend(self.target_vocab.decode([i]))
        return words

    # ------------------------------------------------------------------ pieces

    def _check(self, example: Example) -> tuple[str, ...]:
        where = example.source or "an example"
        if isinstance(example.label, str):
            raise DataError(f"{where}: a seq2seq example needs a target token sequence")
        if len(example) == 0:
            raise DataError(f"{where}: empty source")
        if not example.label:
            raise DataError(f"{where}: empty target")
        if self.max_source_len is not None and len(example) > self.max_source_len:
            raise DataError(
                f"{where}: source has length {len(example)}, longer than the model's "
                f"max_len {self.max_source_len}"
            )
        if self.max_target_len is not None and len(example.label) > self.max_target_len:
            raise DataError(
                f"{where}: target has length {len(example.label)}, longer than the model's "
                f"max_len {self.max_target_len}"
            )
        return tuple(example.label)

    def _sources(self, examples: Sequence[Example], length: int) -> Tensor:
        if all(e.tokens is not None for e in examples):
            if self.source_vocab is None:
                raise ValueError("text sources need a source vocabulary")
            ids = torch.full((len(examples), length), PAD_ID, dtype=torch.long)
            for b, example in enumerate(examples):
                assert example.tokens is not None
                ids[b, : len(example)] = torch.tensor(self.source_vocab.encode(example.tokens))
            return ids  # (B, S)
        if all(e.features is not None for e in examples):
            dims = {e.features.shape[1] for e in examples if e.features is not None}
            if len(dims) != 1:
                raise DataError(f"{examples[0].source}: feature sizes differ ({sorted(dims)})")
            out = np.zeros((len(examples), length, dims.pop()), dtype=np.float32)
            for b, example in enumerate(examples):
                assert example.features is not None
                out[b, : len(example)] = example.features
            return torch.from_numpy(out)  # (B, S, F)
        raise ValueError("a batch mixes text examples and vector examples")

    def _copy_ids(
        self, examples: Sequence[Example], length: int
    ) -> tuple[Tensor | None, list[list[str]]]:
        if self.target != "copy":
            return None, []
        assert self.target_vocab is not None
        size = len(self.target_vocab)
        copy_ids = torch.full((len(examples), length), PAD_ID, dtype=torch.long)
        extended: list[list[str]] = []
        for b, example in enumerate(examples):
            assert example.tokens is not None
            words: list[str] = []
            row = []
            for token in example.tokens:
                i = self.target_vocab.token_id(token)
                if i == UNK_ID:
                    if token not in words:
                        words.append(token)
                    i = size + words.index(token)
                row.append(i)
            copy_ids[b, : len(row)] = torch.tensor(row)
            extended.append(words)
        return copy_ids, extended
