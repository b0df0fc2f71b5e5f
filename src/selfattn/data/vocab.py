"""Vocabularies: words, characters and labels to ids, and BPE subwords.

A model sees integers. :class:`Vocabulary` maps tokens (ids 0 = ``<pad>``, 1 = ``<unk>``),
:class:`CharVocabulary` maps the characters of each token (so a tagger can guess a word it
never saw from its spelling), :class:`LabelVocabulary` maps output labels. Each turns into a
plain dict with ``to_dict`` for a JSON checkpoint and back with ``from_dict``.

:func:`train_bpe` learns a byte-pair-encoding subword tokenizer (``tokenizers`` library)
for sequence tasks, where the label does not depend on word boundaries; token tasks keep
words, since their labels belong to words.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

from selfattn.datatypes import DataError, DatasetSplits, Example
from selfattn.specials import NO_LABEL, PAD, PAD_ID, UNK, UNK_ID


class Vocabulary:
    """Token ↔ id, with ``<pad>`` = 0 and ``<unk>`` = 1.

    Args:
        tokens: the known tokens in id order, starting at id 2 (no specials).
        lowercase: fold tokens to lower case before looking them up.
    """

    def __init__(self, tokens: Iterable[str] = (), *, lowercase: bool = False) -> None:
        self.lowercase = lowercase
        self._itos: list[str] = [PAD, UNK]
        self._stoi: dict[str, int] = {PAD: PAD_ID, UNK: UNK_ID}
        for token in tokens:
            if token not in self._stoi:
                self._stoi[token] = len(self._itos)
                self._itos.append(token)

    @classmethod
    def build(
        cls,
        sequences: Iterable[Sequence[str]],
        *,
        min_freq: int = 1,
        max_size: int | None = None,
        lowercase: bool = False,
    ) -> Vocabulary:
        """Count training tokens; keep those seen ``min_freq`` times, most frequent first.

        Ties are broken alphabetically so the ids do not depend on the data's order.
        ``max_size`` caps the number of ids, specials included.
        """
        counts: Counter[str] = Counter()
        for sequence in sequences:
            counts.update([t.lower() for t in sequence] if lowercase else sequence)
        frequent = (t for t, c in counts.items() if c >= min_freq)
        kept = sorted(frequent, key=lambda t: (-counts[t], t))
        if max_size is not None:
            kept = kept[: max(0, max_size - 2)]
        return cls(kept, lowercase=lowercase)

    def __len__(self) -> int:
        return len(self._itos)

    def __contains__(self, token: object) -> bool:
        return isinstance(token, str) and self._normal(token) in self._stoi

    def _normal(self, token: str) -> str:
        return token.lower() if self.lowercase else token

    def token_id(self, token: str) -> int:
        """The id of ``token``, ``UNK_ID`` if unknown."""
        return self._stoi.get(self._normal(token), UNK_ID)

    def encode(self, tokens: Sequence[str]) -> list[int]:
        """Ids of ``tokens``; unknown tokens map to ``<unk>``."""
        return [self.token_id(t) for t in tokens]

    def decode(self, ids: Iterable[int]) -> list[str]:
        """Tokens of ``ids`` (padding included; strip it yourself if unwanted)."""
        return [self._itos[i] for i in ids]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready description: ``{"tokens": [...], "lowercase": bool}``."""
        return {"tokens": self._itos[2:], "lowercase": self.lowercase}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Vocabulary:
        """Inverse of :meth:`to_dict`."""
        return cls(data["tokens"], lowercase=bool(data.get("lowercase", False)))


class CharVocabulary:
    """Characters of each token → ids, padded / truncated to ``max_word_len``.

    Built from the training words; characters never seen map to ``<unk>``. A word's ids are
    ``max_word_len`` long, padded with ``<pad>`` = 0 on the right.
    """

    def __init__(self, chars: Iterable[str] = (), *, max_word_len: int = 16) -> None:
        if max_word_len < 1:
            raise ValueError(f"max_word_len must be ≥ 1, got {max_word_len}")
        self.chars = Vocabulary(chars)
        self.max_word_len = max_word_len

    @classmethod
    def build(
        cls, sequences: Iterable[Sequence[str]], *, min_freq: int = 1, max_word_len: int = 16
    ) -> CharVocabulary:
        """Characters of the training tokens, seen at least ``min_freq`` times."""
        words = (word for sequence in sequences for word in sequence)
        vocab = Vocabulary.build(words, min_freq=min_freq)  # a word is a sequence of chars
        return cls(vocab.to_dict()["tokens"], max_word_len=max_word_len)

    def __len__(self) -> int:
        return len(self.chars)

    def encode_word(self, word: str) -> list[int]:
        """``max_word_len`` ids of the word's first characters, right-padded with 0."""
        ids = self.chars.encode(word[: self.max_word_len])
        return ids + [PAD_ID] * (self.max_word_len - len(ids))

    def encode(self, tokens: Sequence[str]) -> list[list[int]]:
        """``(len(tokens), max_word_len)`` nested list of character ids."""
        return [self.encode_word(t) for t in tokens]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready description."""
        return {"chars": self.chars.to_dict()["tokens"], "max_word_len": self.max_word_len}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CharVocabulary:
        """Inverse of :meth:`to_dict`."""
        return cls(data["chars"], max_word_len=int(data["max_word_len"]))


class LabelVocabulary:
    """Output labels ↔ ids (no specials: every id is a class)."""

    def __init__(self, labels: Iterable[str]) -> None:
        self._itos: list[str] = []
        self._stoi: dict[str, int] = {}
        for label in labels:
            if label not in self._stoi:
                self._stoi[label] = len(self._itos)
                self._itos.append(label)

    @classmethod
    def build(cls, examples: Iterable[Example]) -> LabelVocabulary:
        """The labels of training ``examples`` (token or sequence task), sorted
        (:data:`~selfattn.specials.NO_LABEL`, an unscored position, is not a class)."""
        seen: set[str] = set()
        for example in examples:
            if isinstance(example.label, str):
                seen.add(example.label)
            else:
                seen.update(example.label)
        return cls(sorted(seen - {NO_LABEL}))

    @classmethod
    def for_splits(cls, splits: DatasetSplits) -> LabelVocabulary:
        """The label set of a whole dataset: train, dev and test.

        A label set is part of the task's definition, not something learned, and a rare
        label can be missing from train (pos-wsj's ``SYM`` and ``LS`` occur only in dev /
        test); building from train alone would make evaluation fail on them. Build the
        *token* vocabulary from train only.
        """
        return cls.build([*splits.train, *splits.dev, *splits.test])

    def __len__(self) -> int:
        return len(self._itos)

    def __contains__(self, label: object) -> bool:
        return label in self._stoi

    @property
    def labels(self) -> list[str]:
        """The labels in id order."""
        return list(self._itos)

    def encode(self, label: str, source: str = "") -> int:
        """The id of ``label``.

        Raises:
            DataError: ``label`` was not among the training labels; the message names
                ``source`` (e.g. ``dev.txt:12``).
        """
        try:
            return self._stoi[label]
        except KeyError:
            where = f"{source}: " if source else ""
            known = ", ".join(self._itos[:20]) + (", …" if len(self._itos) > 20 else "")
            raise DataError(
                f"{where}label {label!r} was not seen in the training data (known: {known})"
            ) from None

    def decode(self, index: int) -> str:
        """The label with id ``index``."""
        return self._itos[index]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready description."""
        return {"labels": list(self._itos)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> LabelVocabulary:
        """Inverse of :meth:`to_dict`."""
        return cls(data["labels"])


# --------------------------------------------------------------------------- BPE


def train_bpe(
    texts: Iterable[str],
    vocab_size: int,
    *,
    lowercase: bool = False,
    extra_specials: Sequence[str] = (),
) -> Tokenizer:
    """Learn a BPE subword tokenizer on whitespace-separated ``texts``.

    ``<pad>`` and ``<unk>`` get ids 0 and 1 as in :class:`Vocabulary`, so
    :func:`bpe_vocabulary` can reuse the tokenizer's ids. Word ends are marked with a
    ``</w>`` suffix, so decoding restores the spaces between words.

    Args:
        texts: training sentences (e.g. ``" ".join(example.tokens)``).
        vocab_size: the number of subwords to learn, specials and characters included.
        lowercase: fold text to lower case first.
        extra_specials: more special tokens, at ids 2, 3, … (e.g. ``<bos>``, ``<eos>``
            for seq2seq targets).

    Returns:
        A ``tokenizers.Tokenizer``; save it in a checkpoint with ``tokenizer.to_str()`` and
        load it with ``Tokenizer.from_str``.
    """
    tokenizer = Tokenizer(models.BPE(unk_token=UNK, end_of_word_suffix="</w>"))
    if lowercase:
        tokenizer.normalizer = normalizers.Lowercase()
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tokenizer.decoder = decoders.BPEDecoder(suffix="</w>")
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=[PAD, UNK, *extra_specials],
        end_of_word_suffix="</w>",
        show_progress=False,
    )
    tokenizer.train_from_iterator(texts, trainer=trainer)
    return tokenizer


def bpe_vocabulary(tokenizer: Tokenizer) -> Vocabulary:
    """A :class:`Vocabulary` whose ids equal ``tokenizer``'s (specials at 0 and 1)."""
    by_id = sorted(tokenizer.get_vocab().items(), key=lambda item: item[1])
    if [t for t, _ in by_id[:2]] != [PAD, UNK]:
        raise ValueError("tokenizer must have <pad> = 0 and <unk> = 1 (use train_bpe)")
    return Vocabulary(t for t, _ in by_id[2:])


def bpe_retokenize(
    examples: Iterable[Example], tokenizer: Tokenizer, *, label_sets: bool = False
) -> list[Example]:
    """Split the words of sequence-task ``examples`` into BPE subwords; with
    ``label_sets``, of multilabel examples (a label set belongs to the whole text).

    Raises:
        ValueError: an example is a token-task one (its labels belong to whole words).
    """
    result = []
    for example in examples:
        if example.tokens is None:
            result.append(example)
            continue
        if not label_sets and not isinstance(example.label, str):
            raise ValueError("BPE re-tokenisation is for sequence tasks; token tasks keep words")
        pieces = tokenizer.encode(list(example.tokens), is_pretokenized=True).tokens
        result.append(Example(tuple(pieces), None, example.label, example.source))
    return result
