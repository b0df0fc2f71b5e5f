"""WordPiece tokenization for a BERT checkpoint, read from the checkpoint's own files.

The ``tokenizers`` library does the work from the folder's ``tokenizer.json`` (or, in an
older folder, ``vocab.txt`` with ``tokenizer_config.json``'s ``do_lower_case``): the
checkpoint's normaliser (lower-casing for uncased models), BERT's pre-tokenizer and the
WordPiece vocabulary. This wrapper fixes what a batch needs whatever the file says:
``[CLS] A [SEP]`` (``[CLS] A [SEP] B [SEP]`` for pairs, token type 1 on B), truncation to
the model's positions, padding with ``[PAD]`` to the batch's longest row, and the word
index of every token, so a word's label can go on its first subword.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
from tokenizers import Encoding, Tokenizer
from tokenizers.models import WordPiece
from tokenizers.normalizers import BertNormalizer
from tokenizers.pre_tokenizers import BertPreTokenizer
from tokenizers.processors import TemplateProcessing

from selfattn.pretrained.weights import PretrainedError, pretrained_folder
from selfattn.specials import IGNORE_INDEX

#: The special tokens every BERT vocabulary must hold.
REQUIRED_SPECIALS = ("[CLS]", "[SEP]", "[PAD]")


@dataclass(frozen=True)
class EncodedBatch:
    """A batch of B rows padded to the longest, T tokens each.

    Attributes:
        input_ids: ``(B, T)`` long, vocabulary ids, ``[PAD]`` after each row's end.
        attention_mask: ``(B, T)`` long, 1 at real tokens and 0 at padding (Hugging
            Face's convention; :attr:`key_padding_mask` is selfattn's).
        token_type_ids: ``(B, T)`` long, 0 for the first segment, 1 for the second.
        word_ids: per row, per token, the index of the word it comes from (counted in
            its segment), ``None`` for ``[CLS]``, ``[SEP]`` and ``[PAD]``.
    """

    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    token_type_ids: torch.Tensor
    word_ids: tuple[tuple[int | None, ...], ...]

    @property
    def key_padding_mask(self) -> torch.Tensor:
        """``(B, T)`` bool, True at padding (the attention modules' convention)."""
        return self.attention_mask == 0

    def first_subword_labels(
        self, labels: Sequence[Sequence[int]], ignore_index: int = IGNORE_INDEX
    ) -> torch.Tensor:
        """Put each word's label on its first subword, ``ignore_index`` everywhere else.

        Args:
            labels: per row, one label per word (the words given to
                :meth:`WordPieceTokenizer.encode_words`). Words cut off by truncation
                lose their label.

        Returns:
            ``(B, T)`` long.
        """
        if len(labels) != len(self.word_ids):
            raise ValueError(f"{len(labels)} label rows for a batch of {len(self.word_ids)}")
        out = torch.full_like(self.input_ids, ignore_index)
        for row, (words, row_labels) in enumerate(zip(self.word_ids, labels, strict=True)):
            previous: int | None = None
            for position, word in enumerate(words):
                if word is not None and word != previous:
                    out[row, position] = row_labels[word]
                previous = word
        return out


class WordPieceTokenizer:
    """A checkpoint's WordPiece tokenizer that returns padded batches.

    Example::

        tokenizer = WordPieceTokenizer.from_pretrained("minilm-l6")
        batch = tokenizer.encode(["Hello, world!", "A longer second sentence."])
        batch.input_ids  # (2, T): [CLS] hello , world ! [SEP] [PAD] ...
    """

    def __init__(self, tokenizer: Tokenizer, *, max_length: int = 512, source: str = "") -> None:
        """Wrap a loaded ``tokenizers.Tokenizer``.

        Args:
            tokenizer: its normaliser, pre-tokenizer and WordPiece model are kept; its
                post-processor, padding and truncation are replaced (it is changed).
            max_length: the longest row, ``[CLS]`` and ``[SEP]`` included (the model's
                position count).
            source: the file it came from, named in errors.

        Raises:
            PretrainedError: the vocabulary lacks ``[CLS]``, ``[SEP]`` or ``[PAD]``.
        """
        ids: dict[str, int] = {}
        for token in REQUIRED_SPECIALS:
            found = tokenizer.token_to_id(token)
            if found is None:
                raise PretrainedError(
                    f"{source or 'tokenizer'}: no {token} token in the vocabulary "
                    f"(a BERT tokenizer needs {', '.join(REQUIRED_SPECIALS)})"
                )
            ids[token] = found
        tokenizer.post_processor = TemplateProcessing(
            single="[CLS] $A:0 [SEP]:0",
            pair="[CLS]:0 $A:0 [SEP]:0 $B:1 [SEP]:1",
            special_tokens=[("[CLS]", ids["[CLS]"]), ("[SEP]", ids["[SEP]"])],
        )
        tokenizer.enable_truncation(max_length)
        tokenizer.enable_padding(pad_id=ids["[PAD]"], pad_token="[PAD]", pad_type_id=0)
        self.tokenizer = tokenizer
        self.max_length = max_length
        self.pad_id = ids["[PAD]"]
        self.cls_id = ids["[CLS]"]
        self.sep_id = ids["[SEP]"]

    @classmethod
    def from_pretrained(
        cls, name_or_path: str | Path, *, max_length: int | None = None
    ) -> WordPieceTokenizer:
        """The tokenizer of a registered checkpoint (fetched on demand) or a local folder.

        Args:
            name_or_path: see :func:`~selfattn.pretrained.weights.pretrained_folder`.
            max_length: defaults to ``config.json``'s ``max_position_embeddings`` (512
                when absent).

        Raises:
            PretrainedError: not a checkpoint folder, no readable tokenizer file, or a
                vocabulary without ``[CLS]`` / ``[SEP]`` / ``[PAD]``.
        """
        folder = pretrained_folder(name_or_path)
        if max_length is None:
            max_length = _max_positions(folder / "config.json")
        tokenizer_file = folder / "tokenizer.json"
        if tokenizer_file.is_file():
            try:
                tokenizer = Tokenizer.from_file(str(tokenizer_file))
            except Exception as err:  # the Rust library raises a bare Exception
                raise PretrainedError(f"{tokenizer_file}: not a tokenizers file ({err})") from None
            return cls(tokenizer, max_length=max_length, source=str(tokenizer_file))
        vocab_file = folder / "vocab.txt"
        if vocab_file.is_file():
            tokenizer = _from_vocab(vocab_file, folder / "tokenizer_config.json")
            return cls(tokenizer, max_length=max_length, source=str(vocab_file))
        raise PretrainedError(f"{tokenizer_file}: missing (and no vocab.txt beside it)")

    def to_str(self) -> str:
        """The whole tokenizer as JSON (a checkpoint stores it: a run folder needs no
        pretrained folder to predict)."""
        return str(self.tokenizer.to_str())

    def plain_json(self) -> str:
        """The tokenizer as JSON without this wrapper's padding and truncation (what a
        Hugging Face folder's ``tokenizer.json`` holds: its loader pads and cuts per call)."""
        copy = Tokenizer.from_str(self.tokenizer.to_str())
        copy.no_padding()
        copy.no_truncation()
        return str(copy.to_str())

    @classmethod
    def from_str(cls, text: str, *, max_length: int) -> WordPieceTokenizer:
        """The inverse of :meth:`to_str`."""
        return cls(Tokenizer.from_str(text), max_length=max_length, source="the checkpoint")

    @property
    def vocab_size(self) -> int:
        """The number of ids, added tokens included."""
        return int(self.tokenizer.get_vocab_size(with_added_tokens=True))

    def encode(self, texts: Sequence[str], pairs: Sequence[str] | None = None) -> EncodedBatch:
        """Tokenize raw sentences (and optional second segments) into one padded batch.

        Word ids count the pre-tokenizer's words (``"Hello, world!"`` has 4: hello , world !).
        """
        if isinstance(texts, str):
            raise TypeError("encode takes a list of sentences, not one string")
        if pairs is None:
            encodings = self.tokenizer.encode_batch(list(texts))
        else:
            if len(pairs) != len(texts):
                raise ValueError(f"{len(pairs)} second segments for {len(texts)} sentences")
            encodings = self.tokenizer.encode_batch(list(zip(texts, pairs, strict=True)))
        return _batch(encodings)

    def encode_words(self, sentences: Sequence[Sequence[str]]) -> EncodedBatch:
        """Tokenize sentences already split into words; word ids index those words."""
        rows = [list(words) for words in sentences]
        return _batch(self.tokenizer.encode_batch(rows, is_pretokenized=True))

    def tokens(self, text: str) -> list[str]:
        """The WordPiece tokens of one sentence, ``[CLS]`` and ``[SEP]`` included."""
        return list(self.tokenizer.encode(text).tokens)


def _batch(encodings: list[Encoding]) -> EncodedBatch:
    return EncodedBatch(
        input_ids=torch.tensor([e.ids for e in encodings], dtype=torch.long),
        attention_mask=torch.tensor([e.attention_mask for e in encodings], dtype=torch.long),
        token_type_ids=torch.tensor([e.type_ids for e in encodings], dtype=torch.long),
        word_ids=tuple(tuple(e.word_ids) for e in encodings),
    )


def _read_json(path: Path) -> dict[str, object]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise PretrainedError(f"{path}: not readable JSON ({err})") from None
    if not isinstance(data, dict):
        raise PretrainedError(f"{path}: expected a JSON object, got {type(data).__name__}")
    return data


def _max_positions(config_file: Path) -> int:
    """``max_position_embeddings`` of ``config.json`` (512, BERT's, when absent)."""
    value = _read_json(config_file).get("max_position_embeddings", 512)
    if not isinstance(value, int) or isinstance(value, bool) or value < 2:
        raise PretrainedError(
            f"{config_file}: max_position_embeddings must be an integer >= 2, got {value!r}"
        )
    return value


def _from_vocab(vocab_file: Path, config_file: Path) -> Tokenizer:
    """A BERT tokenizer from ``vocab.txt`` (lower-casing unless the config says not)."""
    lowercase = True
    if config_file.is_file():
        lowercase = bool(_read_json(config_file).get("do_lower_case", True))
    try:
        model = WordPiece.from_file(str(vocab_file), unk_token="[UNK]")
    except Exception as err:  # the Rust library raises a bare Exception
        raise PretrainedError(f"{vocab_file}: not a WordPiece vocabulary ({err})") from None
    tokenizer = Tokenizer(model)
    tokenizer.normalizer = BertNormalizer(lowercase=lowercase)
    tokenizer.pre_tokenizer = BertPreTokenizer()
    return tokenizer


__all__ = ["REQUIRED_SPECIALS", "EncodedBatch", "WordPieceTokenizer"]
