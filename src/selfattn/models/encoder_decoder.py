"""What decoding and the seq2seq task need of an encoder–decoder, whatever it is built of.

Two families implement it: the Transformer (:class:`~selfattn.models.seq2seq.Seq2SeqTransformer`,
whose decoding state is a key/value cache) and the RNN encoder–decoder with attention
(:class:`~selfattn.models.rnn_seq2seq.RNNSeq2Seq`, whose state is the recurrent state).
:mod:`selfattn.decoding` is written once against this protocol: greedy, beam search and
sampling ask the model for a fresh :class:`DecodingState`, hand it back to every
:meth:`EncoderDecoder.decode` call, and move its rows with :meth:`DecodingState.reorder`
when beams are re-ranked or finished rows dropped.

What the two families share is here too: the module they derive from
(:class:`EncoderDecoderModule`: embeddings, the teacher-forced ``forward``, attention
maps), the initialisation of their word tables (:func:`token_embedding`) and the checks of
their options and inputs.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from typing import Any, Protocol, TypedDict, Unpack, cast

import torch
from torch import Tensor, nn

from selfattn.models.seq2seq_outputs import (
    DecoderStates,
    EncodedSource,
    Seq2SeqAttentionMaps,
    Seq2SeqOutput,
)
from selfattn.specials import NUM_SPECIALS, PAD_ID, UNK_ID


class DecodeFlags(TypedDict, total=False):
    """The teacher-forcing keywords of ``decode``, ``decode_states`` and
    ``decoder_states``, handed on as they are.

    Attributes:
        target_padding: ``(B, T)`` True at padding (all positions so far when caching);
            default none.
        causal: mask the future (default True; False for non-autoregressive decoding,
            which the RNN encoder–decoder refuses).
        need_weights: also return the attention weights of every layer; default False.
    """

    target_padding: Tensor | None
    causal: bool
    need_weights: bool


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
        cache: Any = None,
        num_extended: int = 0,
        **flags: Unpack[DecodeFlags],
    ) -> Seq2SeqOutput:
        """Next-token log-probabilities ``(B, T, V)`` for every position of ``target_in``.

        Args:
            target_in: ``(B, T)`` decoder input ids (BOS, y₁, …).
            encoded: from :meth:`encode`.
            cache: incremental decoding (from :meth:`new_cache`, carried between calls);
                ``target_in`` then holds only the new positions.
            num_extended: copy mode: size of the batch's out-of-vocabulary extension.
            **flags: :class:`DecodeFlags`.

        Returns:
            A :class:`~selfattn.models.seq2seq_outputs.Seq2SeqOutput`.
        """
        ...

    def new_cache(self, capacity: int) -> DecodingState:
        """An empty decoding state for up to ``capacity`` decoder inputs."""
        ...

    def predict_length(self, encoded: EncodedSource) -> Tensor:
        """``(B, max_len + 1)`` target-length logits (non-autoregressive decoding)."""
        ...


class EncoderDecoderModule(nn.Module, ABC):
    """The module both families derive from: their word embeddings, the checks of a
    source batch, the teacher-forced ``forward`` and the attention maps of an
    :class:`EncoderDecoder`.

    A subclass sets ``max_len`` and ``target_vocab_size`` and builds its embeddings with
    :meth:`init_embeddings`.
    """

    max_len: int
    target_vocab_size: int
    embed_scale: float
    source_embed: nn.Module
    target_embed: nn.Module

    def __init__(self) -> None:
        super().__init__()
        #: What the model was built from (a task spec), kept for checkpoints; set by builders.
        self.spec: object | None = None

    def init_embeddings(
        self,
        embed_dim: int,
        *,
        source_vocab_size: int | None,
        source_feature_dim: int | None,
        target_rows: int,
        share_embeddings: bool,
    ) -> None:
        """Build ``source_embed`` (a word table for text, a linear map of F-dimensional
        vectors otherwise), then ``target_embed`` (``target_rows`` words, or the source's
        table when ``share_embeddings``); both are scaled by √E on input."""
        self.embed_scale = math.sqrt(embed_dim)
        if source_vocab_size is not None:
            self.source_embed = token_embedding(source_vocab_size, embed_dim)
        else:
            assert source_feature_dim is not None
            self.source_embed = nn.Linear(source_feature_dim, embed_dim)
        self.target_embed = (
            self.source_embed if share_embeddings else token_embedding(target_rows, embed_dim)
        )

    def output_projection(self, embed_dim: int, *, tie_output: bool) -> nn.Linear:
        """The ``(E → V)`` vocabulary projection, reusing the target embedding matrix when
        ``tie_output`` (Press & Wolf 2017)."""
        projection = nn.Linear(embed_dim, self.target_vocab_size, bias=False)
        if tie_output:
            assert isinstance(self.target_embed, nn.Embedding)
            projection.weight = self.target_embed.weight
        return projection

    def embed_source(self, source: Tensor) -> Tensor:
        """``(B, S)`` ids or ``(B, S, F)`` vectors → ``(B, S, E)`` (word vectors × √E)."""
        vectors = self.source_embed(source)
        if isinstance(self.source_embed, nn.Embedding):
            vectors = vectors * self.embed_scale
        return vectors

    def embed_words(self, ids: Tensor) -> Tensor:
        """``(B, T)`` target ids → word vectors ``(B, T, E)`` × √E."""
        # Copied words outside the vocabulary are read back as <unk> (See et al. 2017).
        ids = ids.masked_fill(ids >= self.target_vocab_size, UNK_ID)
        return self.target_embed(ids) * self.embed_scale

    def check_source(self, source: Tensor, padding: Tensor) -> None:
        """Refuse a source whose ``(B, S)`` is not its padding's, or longer than ``max_len``."""
        if source.shape[:2] != padding.shape:
            raise ValueError(
                f"source {tuple(source.shape)} and padding {tuple(padding.shape)} disagree "
                "on (B, S)"
            )
        if source.shape[1] > self.max_len:
            raise ValueError(
                f"source of length {source.shape[1]} is longer than the model's max_len "
                f"({self.max_len})"
            )

    def decode_states(
        self, target_in: Tensor, encoded: EncodedSource, **flags: Unpack[DecodeFlags]
    ) -> DecoderStates:
        """A teacher-forced ``decode`` (no cache) up to the inputs of the vocabulary
        projection ``out_proj``, for a loss that applies the projection itself
        (:mod:`selfattn.train.fused_ce`); the vocabulary output only."""
        output = getattr(self, "output", "vocab")
        if output != "vocab":
            raise ValueError(f"decode_states is the vocabulary output's, not {output!r}'s")
        return self.decoder_states(target_in, encoded, None, **flags)

    @abstractmethod
    def decoder_states(
        self, target_in: Tensor, encoded: EncodedSource, cache: Any, **flags: Unpack[DecodeFlags]
    ) -> DecoderStates:
        """:meth:`decode_states` and ``decode`` up to ``out_proj``, with ``cache`` (each
        model's own decoder)."""

    def check_target_in(self, target_in: Tensor, encoded: EncodedSource, offset: int) -> None:
        """Refuse decoder inputs that are not ``(B, T)`` for the encoded batch, or that
        would run past ``max_len`` output tokens (BOS, y₁ … y_max_len) after ``offset``
        cached ones."""
        if target_in.dim() != 2 or target_in.shape[0] != encoded.memory.shape[0]:
            raise ValueError(
                f"target_in must be (B, T) with B = {encoded.memory.shape[0]}, got "
                f"{tuple(target_in.shape)}"
            )
        if offset + target_in.shape[1] > self.max_len + 1:
            raise ValueError(
                f"target of length {offset + target_in.shape[1]} exceeds the model's "
                f"max_len + 1 ({self.max_len + 1})"
            )

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
        """Encode, then decode every position of ``target_in`` (teacher forcing), as
        training and scoring run it: ``(B, S)`` ids or ``(B, S, F)`` vectors, their
        ``(B, S)`` padding and the ``(B, T)`` decoder inputs → next-token log-probabilities
        ``(B, T, V)``."""
        model = cast(EncoderDecoder, self)
        encoded = model.encode(source, source_padding, copy_ids=copy_ids)
        return model.decode(
            target_in,
            encoded,
            target_padding=target_padding,
            need_weights=need_weights,
            num_extended=num_extended,
        )

    def encode_with_weights(
        self, source: Tensor, padding: Tensor, *, copy_ids: Tensor | None = None
    ) -> tuple[EncodedSource, list[Tensor]]:
        """:meth:`EncoderDecoder.encode`, and the encoder's self-attention weights per
        layer: none here (an RNN encoder has no self-attention); a Transformer overrides it."""
        return cast(EncoderDecoder, self).encode(source, padding, copy_ids=copy_ids), []

    @torch.no_grad()
    def attention_maps(
        self,
        source: Tensor,
        source_padding: Tensor,
        target_in: Tensor,
        *,
        target_padding: Tensor | None = None,
        copy_ids: Tensor | None = None,
        num_extended: int = 0,
    ) -> Seq2SeqAttentionMaps:
        """Every layer's attention weights under teacher forcing, per head.

        Args:
            source: ``(B, S)`` token ids or ``(B, S, F)`` vectors.
            source_padding: ``(B, S)`` boolean, True at padding.
            target_in: ``(B, T)`` decoder input ids: BOS and a target prefix (e.g. the
                decoded output), so row t shows what predicting token t + 1 attended to.
            target_padding: ``(B, T)`` True at target padding.
            copy_ids: ``(B, S)`` copy mode's extended-vocabulary ids of the source.
            num_extended: copy mode: size of the out-of-vocabulary extension.

        Returns:
            A :class:`Seq2SeqAttentionMaps`; rows sum to 1 over real keys (softmax), and
            padded keys and the decoder's future get exactly 0. The RNN encoder–decoder's
            ``cross`` is one ``(B, 1, T, S)`` map and its ``encoder`` and ``decoder`` are
            empty (it has no self-attention).

        Raises:
            ValueError: the encoder's attention kernel forms no attention matrix (its
                one-line refusal).
        """
        encoded, encoder_maps = self.encode_with_weights(source, source_padding, copy_ids=copy_ids)
        out = cast(EncoderDecoder, self).decode(
            target_in,
            encoded,
            target_padding=target_padding,
            need_weights=True,
            num_extended=num_extended,
        )
        assert out.cross_attentions is not None
        return Seq2SeqAttentionMaps(encoder_maps, out.self_attentions or [], out.cross_attentions)


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


def check_source_input(source_vocab_size: int | None, source_feature_dim: int | None) -> None:
    """Refuse a source that is both or neither text (a vocabulary) and vectors (F)."""
    if (source_vocab_size is None) == (source_feature_dim is None):
        raise ValueError("give exactly one of source_vocab_size and source_feature_dim")


def check_target_vocab(target_vocab_size: int) -> None:
    """Refuse a target vocabulary of nothing but the special ids."""
    if target_vocab_size <= NUM_SPECIALS:
        raise ValueError(
            f"target_vocab_size ({target_vocab_size}) must exceed the {NUM_SPECIALS} "
            "special ids (pad, unk, bos, eos)"
        )


def check_shared_embeddings(
    share_embeddings: bool,
    source_vocab_size: int | None,
    target_vocab_size: int,
    *,
    pointer: bool = False,
) -> None:
    """Refuse ``share_embeddings`` unless both sides are text of one vocabulary size (a
    pointer's outputs are source positions, not words)."""
    if share_embeddings and (source_vocab_size != target_vocab_size or pointer):
        raise ValueError(
            "share_embeddings needs text on both sides with one vocabulary size, got "
            f"source {source_vocab_size} and target {target_vocab_size}"
        )
