"""What decoding and the seq2seq task need of an encoder–decoder, whatever it is built of.

Two families implement it: the Transformer (:class:`~selfattn.models.seq2seq.Seq2SeqTransformer`,
whose decoding state is a key/value cache) and the RNN encoder–decoder with attention
(:class:`~selfattn.models.rnn_seq2seq.RNNSeq2Seq`, whose state is the recurrent state).
:mod:`selfattn.decoding` is written once against this protocol: greedy, beam search and
sampling ask the model for a fresh :class:`DecodingState`, hand it back to every
:meth:`EncoderDecoder.decode` call, and move its rows with :meth:`DecodingState.reorder`
when beams are re-ranked or finished rows dropped.

What the two families share is here too: the teacher-forced ``forward``
(:class:`TeacherForcing`) and the initialisation of their word embeddings
(:func:`token_embedding`).
"""

from __future__ import annotations

from typing import Any, Protocol, cast

import torch
from torch import Tensor, nn

from selfattn.data.specials import PAD_ID
from selfattn.models.seq2seq_outputs import EncodedSource, Seq2SeqOutput


class DecodingState(Protocol):
    """What a model keeps between decoding steps, one row per decoder row."""

    #: Decoder positions consumed so far (0 before the BOS step).
    offset: int

    def reorder(self, index: Tensor, *, memory: bool = True) -> None:
        """Keep rows ``index`` ``(R',)`` (long); ``memory=False``: every kept row reads the
        source of the row it replaces, so what was computed from the source stays."""
        ...


class EncoderDecoder(Protocol):
    """An encoder–decoder that :mod:`selfattn.decoding` can decode."""

    @property
    def max_len(self) -> int:
        """Longest source, and longest target without BOS/EOS."""
        ...

    @property
    def output(self) -> str:
        """``"vocab"``, ``"pointer"`` or ``"copy"``."""
        ...

    @property
    def target_vocab_size(self) -> int:
        """Ids of the target vocabulary, specials included."""
        ...

    def encode(
        self, source: Tensor, padding: Tensor, *, copy_ids: Tensor | None = None
    ) -> EncodedSource:
        """``(B, S)`` ids or ``(B, S, F)`` vectors and ``(B, S)`` padding → the encoded batch."""
        ...

    def decode(
        self,
        target_in: Tensor,
        encoded: EncodedSource,
        *,
        target_padding: Tensor | None = None,
        cache: Any = None,
        causal: bool = True,
        need_weights: bool = False,
        num_extended: int = 0,
    ) -> Seq2SeqOutput:
        """Next-token log-probabilities ``(B, T, V)`` for every position of ``target_in``;
        with ``cache`` (from :meth:`new_cache`) ``target_in`` holds the new positions only."""
        ...

    def new_cache(self, capacity: int) -> DecodingState:
        """An empty decoding state for up to ``capacity`` decoder inputs."""
        ...

    def predict_length(self, encoded: EncodedSource) -> Tensor:
        """``(B, max_len + 1)`` target-length logits (non-autoregressive decoding)."""
        ...


class TeacherForcing(nn.Module):
    """``forward`` of an :class:`EncoderDecoder`: encode, then decode every position of
    ``target_in`` (teacher forcing), as training and scoring run it."""

    def forward(
        self,
        source: Tensor,
        source_padding: Tensor,
        target_in: Tensor,
        *,
        target_padding: Tensor | None = None,
        copy_ids: Tensor | None = None,
        num_extended: int = 0,
        need_weights: bool = False,
    ) -> Seq2SeqOutput:
        """``(B, S)`` ids or ``(B, S, F)`` vectors, their ``(B, S)`` padding and the
        ``(B, T)`` decoder inputs → next-token log-probabilities ``(B, T, V)``."""
        model = cast(EncoderDecoder, self)
        encoded = model.encode(source, source_padding, copy_ids=copy_ids)
        return model.decode(
            target_in,
            encoded,
            target_padding=target_padding,
            need_weights=need_weights,
            num_extended=num_extended,
        )


def token_embedding(rows: int, embed_dim: int) -> nn.Embedding:
    """A word table of N(0, 1/E) rows and a zero padding row: scaled by √E on input they
    have unit size, and a tied output projection starts with logits of unit scale
    (Vaswani et al. 2017, §3.4), not the √E-times larger ones of PyTorch's N(0, 1)
    default, which saturate the softmax."""
    embedding = nn.Embedding(rows, embed_dim, padding_idx=PAD_ID)
    nn.init.normal_(embedding.weight, std=embed_dim**-0.5)
    with torch.no_grad():
        embedding.weight[PAD_ID].zero_()
    return embedding


def check_target_in(target_in: Tensor, encoded: EncodedSource, offset: int, max_len: int) -> None:
    """Refuse decoder inputs that are not ``(B, T)`` for the encoded batch, or that would
    run past ``max_len`` output tokens (BOS, y₁ … y_max_len) after ``offset`` cached ones."""
    if target_in.dim() != 2 or target_in.shape[0] != encoded.memory.shape[0]:
        raise ValueError(
            f"target_in must be (B, T) with B = {encoded.memory.shape[0]}, got "
            f"{tuple(target_in.shape)}"
        )
    if offset + target_in.shape[1] > max_len + 1:
        raise ValueError(
            f"target of length {offset + target_in.shape[1]} exceeds the model's "
            f"max_len + 1 ({max_len + 1})"
        )
