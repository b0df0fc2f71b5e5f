"""What decoding and the seq2seq task need of an encoder–decoder, whatever it is built of.

Two families implement it: the Transformer (:class:`~selfattn.models.seq2seq.Seq2SeqTransformer`,
whose decoding state is a key/value cache) and the RNN encoder–decoder with attention
(:class:`~selfattn.models.rnn_seq2seq.RNNSeq2Seq`, whose state is the recurrent state).
:mod:`selfattn.decoding` is written once against this protocol: greedy, beam search and
sampling ask the model for a fresh :class:`DecodingState`, hand it back to every
:meth:`EncoderDecoder.decode` call, and move its rows with :meth:`DecodingState.reorder`
when beams are re-ranked or finished rows dropped.
"""

from __future__ import annotations

from typing import Any, Protocol

from torch import Tensor

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
