"""From a :class:`~selfattn.datatypes.Batch` to the vector set the encoder reads.

Lecture 000 (§"Vector set as input"): a word becomes a vector by an embedding, a speech
frame or any other measurement already is one. Text input may add a character-level
vector per word (max-pooled convolution over its characters, as in Ma & Hovy 2016), so a
word never seen in training is still described by its spelling ("-ing", capitals, digits).

Word dropout (``word_dropout``, training only) replaces real words by the unknown word at
random, so the model also learns to tag words it knows from their spelling and context
alone — which is all it has for words never seen in training.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from selfattn.datatypes import Batch
from selfattn.specials import PAD_ID, UNK_ID


class CharEncoder(nn.Module):
    """Characters of each token → one vector: embed, 1-D convolution, max over characters.

    Args:
        char_vocab_size: number of character ids (including padding).
        out_dim: size of the vector per token (the convolution's channels).
        char_embed_dim: size of a character's embedding.
        kernel_size: convolution width (odd, "same" padding).
        pad_id: the character id used for padding; its embedding is fixed at zero and it
            never wins the max, so a token's vector does not depend on how much padding
            its batch needed.
    """

    def __init__(
        self,
        char_vocab_size: int,
        out_dim: int,
        *,
        char_embed_dim: int = 24,
        kernel_size: int = 3,
        pad_id: int = 0,
    ) -> None:
        super().__init__()
        if kernel_size % 2 == 0:
            raise ValueError(f"kernel_size must be odd, got {kernel_size}")
        self.pad_id = pad_id
        self.embed = nn.Embedding(char_vocab_size, char_embed_dim, padding_idx=pad_id)
        self.conv = nn.Conv1d(char_embed_dim, out_dim, kernel_size, padding=kernel_size // 2)

    def forward(self, char_ids: Tensor) -> Tensor:
        """Args:
            char_ids: ``(B, L, C)`` long, ``pad_id`` after each token's characters.

        Returns:
            ``(B, L, out_dim)``; zero for tokens with no characters (padding tokens).
        """
        batch, length, chars = char_ids.shape
        flat = char_ids.reshape(batch * length, chars)  # (B·L, C)
        x = self.embed(flat).transpose(1, 2)  # (B·L, c, C)
        h = torch.relu(self.conv(x))  # (B·L, out, C), ≥ 0
        # Padding characters become 0, which never beats a real (non-negative) value.
        h = h.masked_fill((flat == self.pad_id)[:, None, :], 0.0)
        pooled = h.amax(dim=-1) if chars else h.new_zeros(h.shape[:2])
        return pooled.reshape(batch, length, -1)


class InputEmbedding(nn.Module):
    """Token ids (plus optional characters) or feature vectors → ``(B, L, E)``.

    Exactly one of ``vocab_size`` (text) and ``feature_dim`` (vector input) is given.

    Args:
        embed_dim: E.
        vocab_size: number of word ids (text input).
        feature_dim: F, size of each input vector (vector input).
        char_vocab_size: number of character ids; when given (text only), a
            :class:`CharEncoder` vector is concatenated to the word embedding and the
            pair projected back to E.
        char_dim: size of the character-level vector.
        word_dropout: probability, in training mode only, that a real (non-padding) word
            id is replaced by the unknown-word id ``UNK_ID`` before embedding; character
            ids are left as they are. ``0``: off.
    """

    def __init__(
        self,
        embed_dim: int,
        *,
        vocab_size: int | None = None,
        feature_dim: int | None = None,
        char_vocab_size: int | None = None,
        char_dim: int = 48,
        word_dropout: float = 0.0,
    ) -> None:
        super().__init__()
        if not 0.0 <= word_dropout < 1.0:
            raise ValueError(f"word_dropout must be in [0, 1), got {word_dropout}")
        if (vocab_size is None) == (feature_dim is None):
            raise ValueError("InputEmbedding needs exactly one of vocab_size and feature_dim")
        if char_vocab_size is not None and vocab_size is None:
            raise ValueError("character features need text input (vocab_size)")
        self.embed_dim = embed_dim
        self.word_dropout = word_dropout
        self.words = nn.Embedding(vocab_size, embed_dim) if vocab_size is not None else None
        self.features = nn.Linear(feature_dim, embed_dim) if feature_dim is not None else None
        self.chars: CharEncoder | None = None
        self.merge: nn.Linear | None = None
        if char_vocab_size is not None:
            self.chars = CharEncoder(char_vocab_size, char_dim)
            self.merge = nn.Linear(embed_dim + char_dim, embed_dim)

    def forward(self, batch: Batch) -> Tensor:
        """Returns the ``(B, L, E)`` input vectors of ``batch``."""
        if self.features is not None:
            if batch.features is None:
                raise ValueError("this model reads feature vectors, but the batch has none")
            return self.features(batch.features)
        assert self.words is not None
        if batch.token_ids is None:
            raise ValueError("this model reads token ids, but the batch has none")
        x = self.words(self.drop_words(batch.token_ids))  # (B, L, E)
        if self.chars is not None and self.merge is not None:
            if batch.char_ids is None:
                raise ValueError("this model reads character ids, but the batch has none")
            x = self.merge(torch.cat([x, self.chars(batch.char_ids)], dim=-1))
        return x

    def padding_mask(self, batch: Batch) -> Tensor:
        """``(B, L)``, True at padding: one vector per input position, so the batch's own
        (an image embedding's patches differ, :mod:`selfattn.models.vision`)."""
        return batch.key_padding_mask

    def drop_words(self, token_ids: Tensor) -> Tensor:
        """``token_ids`` with word dropout applied (a no-op in eval mode or when off).

        Each id other than ``PAD_ID`` becomes ``UNK_ID`` with probability
        ``word_dropout``. No random numbers are drawn when it is off, so runs without
        word dropout keep their random streams.
        """
        if not self.training or self.word_dropout == 0.0:
            return token_ids
        drop = torch.rand(token_ids.shape, device=token_ids.device) < self.word_dropout
        return token_ids.masked_fill(drop & (token_ids != PAD_ID), UNK_ID)
