"""Batches of words for a model fine-tuned from a pretrained checkpoint: the words go
through the checkpoint's own WordPiece tokenizer, and each word is read at its first
wordpiece (the standard recipe for word labels on subword tokens, Devlin et al. 2019 §5.3)."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from selfattn.data.batching.collate import Collator
from selfattn.data.vocab import LabelVocabulary
from selfattn.datatypes import Batch, DataError, Example, Subwords
from selfattn.pretrained.tokenizer import WordPieceTokenizer


class SubwordCollator(Collator):
    """Words → a :class:`Batch` whose ``subwords`` are the checkpoint's wordpieces.

    The word-level parts (``key_padding_mask``, ``labels``) are what :class:`Collator`
    makes, so a token task's labels, metrics and predictions stay one per word.

    Args:
        tokenizer: the checkpoint's tokenizer (its ``max_length`` is the model's
            positions).
        label_vocab: output labels.
        task: ``"token"``, ``"sequence"`` or ``"regression"``.
        max_len: the most words an example may have (``data.max_len``), or ``None``.
    """

    def __init__(
        self,
        tokenizer: WordPieceTokenizer,
        label_vocab: LabelVocabulary,
        task: str,
        max_len: int | None = None,
    ) -> None:
        super().__init__(None, None, label_vocab, task, max_len=max_len)  # type: ignore[arg-type]
        self.tokenizer = tokenizer

    def __call__(self, examples: Sequence[Example]) -> Batch:
        """Pad ``examples`` (text) to the longest one, in words and in wordpieces.

        Raises:
            DataError: an empty example, one longer than ``max_len`` words or than the
                checkpoint's positions in wordpieces, a vector example.
        """
        if not examples:
            raise ValueError("cannot collate an empty list of examples")
        words: list[list[str]] = []
        for example in examples:
            self._check_length(example)
            if example.tokens is None:
                raise DataError(
                    f"{example.source}: a model fine-tuned from a pretrained checkpoint "
                    "reads text, not vectors"
                )
            words.append(list(example.tokens))
        encoded = self.tokenizer.encode_words(words)
        lengths = torch.tensor([len(row) for row in words])
        longest = int(lengths.max())
        first = torch.zeros(len(examples), longest, dtype=torch.long)
        for row, (example, word_ids) in enumerate(zip(examples, encoded.word_ids, strict=True)):
            seen: dict[int, int] = {}
            for position, word in enumerate(word_ids):
                if word is not None and word not in seen:
                    seen[word] = position
            if len(words[row]) - 1 > max(seen, default=-1) and self._truncated(words[row]):
                raise DataError(
                    f"{example.source}: {len(example)} words make more wordpieces than the "
                    f"checkpoint's {self.tokenizer.max_length} positions; lower data.max_len "
                    "or split the input"
                )
            # A word the normaliser erases (a lone control character) has no wordpiece:
            # it is read at [CLS].
            first[row, : len(words[row])] = torch.tensor(
                [seen.get(index, 0) for index in range(len(words[row]))]
            )
        mask = torch.arange(longest)[None, :] >= lengths[:, None]
        labels = self._labels(examples, longest)
        subwords = Subwords(encoded.input_ids, encoded.attention_mask, first)
        return Batch(None, None, None, mask, labels, subwords=subwords)

    def _truncated(self, words: list[str]) -> bool:
        """Whether ``words`` make more wordpieces than the checkpoint reads."""
        return len(self.tokenizer.tokenizer.encode(words, is_pretokenized=True).overflowing) > 0
