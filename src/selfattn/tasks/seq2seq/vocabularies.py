"""The vocabularies of a seq2seq task: one BPE vocabulary for both sides, word
vocabularies, or none (vectors in, pointers out)."""

from __future__ import annotations

from tokenizers import Tokenizer

from selfattn.data import DatasetSplits, Vocabulary
from selfattn.data.batching.seq2seq_collate import target_vocabulary


def seq2seq_vocabularies(
    splits: DatasetSplits,
    bpe: Tokenizer | None,
    output: str,
    *,
    min_freq: int,
    lowercase: bool,
) -> tuple[Vocabulary | None, Vocabulary | None]:
    """The source and target vocabularies of ``splits``' training examples (``None``:
    vectors in, or pointers out).

    Args:
        splits: the dataset, its text already cut into ``bpe``'s pieces when there is one.
        bpe: the BPE both sides share (one table), or ``None`` for word vocabularies.
        output: ``seq2seq.output``: ``vocab``, ``pointer`` or ``copy``.
        min_freq: words seen fewer times become the unknown word.
        lowercase: lowercase the source words.

    Raises:
        ValueError: ``copy`` without text to copy from.
    """
    source_vocab = target_vocab = None
    if splits.input == "text":
        if bpe is not None:
            pieces = sorted(bpe.get_vocab().items(), key=lambda item: item[1])
            shared = Vocabulary(piece for piece, _ in pieces[2:])
            return shared, (None if output == "pointer" else shared)
        sources = [e.tokens or () for e in splits.train]
        source_vocab = Vocabulary.build(sources, min_freq=min_freq, lowercase=lowercase)
        if output != "pointer":
            targets = [tuple(e.label) for e in splits.train]
            target_vocab = target_vocabulary(targets, min_freq=min_freq)
    elif output == "copy":
        raise ValueError("seq2seq.output = 'copy' copies source words: it needs text input")
    elif output == "vocab":
        targets = [tuple(e.label) for e in splits.train]
        target_vocab = target_vocabulary(targets, min_freq=1)
    return source_vocab, target_vocab
