"""The RNN encoder–decoder with attention (lecture 003 §Conditional Generation by RNN &
Attention, "Machine Translation"; Bahdanau, Cho & Bengio 2015; Luong, Pham & Manning 2015).

The model the Transformer was built up from. A bidirectional GRU or LSTM reads the source
into one vector h^j per position ([forward; backward] states). The decoder is a
unidirectional RNN of the same cell; at every output step its state z^t is *matched*
against every h^j — the lecture's "match" function, a learned score trained jointly with
the model — the scores are normalised by a softmax over the source's real positions (α̂,
padding gets exactly 0) and the context vector c^t = Σ_j α̂_j h^j is their weighted sum:

* ``dot``: match(z, h) = zᵀh (Luong); ``scaled_dot``: zᵀh / √d;
* ``general``: zᵀ W_a h (Luong);
* ``additive``: vᵀ tanh(W_z z + W_h h) (Bahdanau;
  :class:`~selfattn.attention.scores.AdditiveScore`).

As in Luong et al.'s global attention, the output at step t reads the attentional vector
h̃^t = tanh(W_c [c^t; z^t]), and with *input feeding* h̃^t is fed to the RNN beside the
next input word, so the context of one step enters the next state — the lecture's picture,
where c^0 is the decoder's input and z^1 is matched next. The decoder starts from
tanh(W [→h_last; ←h_first]), the encoder's final states of both directions.

The model answers :class:`~selfattn.models.encoder_decoder.EncoderDecoder`, so greedy,
beam search and sampling in :mod:`selfattn.decoding` decode it unchanged: its decoding
"cache" is the :class:`RecurrentState` (hidden state, LSTM cell, fed-back vector and, for a
location-aware or forward match, the previous alignment per row), reordered with the
beams. It has the vocabulary output only (no pointer or copy layer) and no
non-autoregressive pass: an RNN decoder reads its outputs left to right.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import ClassVar, Literal, Unpack

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from selfattn.attention.alignment import AlignmentConfig
from selfattn.attention.match import RNN_SCORES as RNN_SCORES  # re-exported
from selfattn.attention.match import MatchAttention
from selfattn.models.encoder_decoder import (
    DecodeFlags,
    EncoderDecoderModule,
    check_shared_embeddings,
    check_source_input,
    check_target_vocab,
)
from selfattn.models.recurrent import bidirectional_rnn, run_packed
from selfattn.models.seq2seq_outputs import (
    DecoderStates,
    EncodedSource,
    Seq2SeqOutput,
    score_precision,
)

RNNCell = Literal["gru", "lstm"]
RNN_CELLS: dict[str, type[nn.GRU] | type[nn.LSTM]] = {"gru": nn.GRU, "lstm": nn.LSTM}


@dataclass
class RecurrentState:
    """The decoder's state between steps, one row per decoder row: the RNN's "cache".

    Attributes:
        hidden: ``(L, R, H)`` every decoder layer's hidden state (``None`` before BOS).
        cell: ``(L, R, H)`` the LSTM's cell state, else ``None``.
        feed: ``(R, E)`` the last attentional vector h̃ (input feeding), else ``None``.
        keys: ``(R, S, ·)`` what the match function reads of the encoder states
            (:meth:`~selfattn.attention.match.MatchAttention.keys`), computed once per
            source: the counterpart of a Transformer's static cross-attention cache.
        alignment: ``(R, S)`` the last step's attention, read by a location-aware or
            forward alignment at the next step, else ``None``.
        offset: decoder inputs consumed so far.
    """

    hidden: Tensor | None = None
    cell: Tensor | None = None
    feed: Tensor | None = None
    keys: Tensor | None = None
    alignment: Tensor | None = None
    offset: int = 0

    def reorder(self, index: Tensor, *, memory: bool = True) -> None:
        """Keep rows ``index`` ``(R',)``; ``memory=False`` leaves the keys (every kept row
        reads the source of the row it replaces)."""
        if memory and self.keys is not None:
            self.keys = self.keys.index_select(0, index)
        if self.hidden is not None:
            self.hidden = self.hidden.index_select(1, index)
        if self.cell is not None:
            self.cell = self.cell.index_select(1, index)
        if self.feed is not None:
            self.feed = self.feed.index_select(0, index)
        if self.alignment is not None:
            self.alignment = self.alignment.index_select(0, index)


class RNNSeq2Seq(EncoderDecoderModule):
    """Embedding → bidirectional RNN encoder → attentive RNN decoder → vocabulary.

    Args:
        target_vocab_size: ids of the target vocabulary, specials included.
        source_vocab_size: ids of the source vocabulary (text input), or ``None``.
        source_feature_dim: F of each source vector (vector input), or ``None``.
        embed_dim: E, the word embeddings' and the attentional vector's size.
        hidden_dim: H, the decoder state's size; each encoder direction has H / 2, so an
            encoder state [→h; ←h] has H too and every score can compare them (even).
        max_len: longest source, and longest target (without BOS and EOS).
        num_layers: stacked encoder RNN layers.
        decoder_layers: stacked decoder RNN layers (default ``num_layers``).
        cell: ``"gru"`` or ``"lstm"``, for both.
        score: the match function, a key of :data:`RNN_SCORES`.
        alignment: the match's alignment: ``content`` (default), location-aware or forward
            attention (:mod:`selfattn.attention.alignment`).
        input_feeding: feed the last attentional vector h̃ with the next input word.
        dropout: on the embeddings, between stacked layers and before the output layer.
        share_embeddings: one table for source and target words (one vocabulary size).
        tie_output: the output projection reuses the target embedding (Press & Wolf 2017).
    """

    output: Literal["vocab"] = "vocab"

    #: It reads its outputs left to right: no non-autoregressive decoding.
    non_autoregressive: ClassVar[bool] = False

    def __init__(
        self,
        *,
        target_vocab_size: int,
        source_vocab_size: int | None = None,
        source_feature_dim: int | None = None,
        embed_dim: int = 128,
        hidden_dim: int = 256,
        max_len: int = 512,
        num_layers: int = 1,
        decoder_layers: int | None = None,
        cell: RNNCell = "gru",
        score: str = "additive",
        input_feeding: bool = True,
        dropout: float = 0.0,
        share_embeddings: bool = False,
        tie_output: bool = True,
        alignment: AlignmentConfig | None = None,
    ) -> None:
        super().__init__()
        check_source_input(source_vocab_size, source_feature_dim)
        if cell not in RNN_CELLS:
            raise ValueError(f"unknown rnn cell {cell!r}; choose one of {', '.join(RNN_CELLS)}")
        if hidden_dim % 2:
            raise ValueError(
                f"the RNN's hidden size ({hidden_dim}) must be even: each encoder direction "
                "has half of it"
            )
        check_target_vocab(target_vocab_size)
        check_shared_embeddings(share_embeddings, source_vocab_size, target_vocab_size)
        decoder_layers = decoder_layers or num_layers
        self.embed_dim, self.hidden_dim, self.max_len = embed_dim, hidden_dim, max_len
        self.target_vocab_size = target_vocab_size
        self.cell, self.input_feeding = cell, input_feeding
        self.init_embeddings(
            embed_dim,
            source_vocab_size=source_vocab_size,
            source_feature_dim=source_feature_dim,
            target_rows=target_vocab_size,
            share_embeddings=share_embeddings,
        )
        rnn = RNN_CELLS[cell]
        self.encoder = bidirectional_rnn(rnn, embed_dim, hidden_dim, num_layers, dropout)
        self.bridge = nn.Linear(hidden_dim, decoder_layers * hidden_dim)
        self.decoder = rnn(
            embed_dim * (2 if input_feeding else 1),
            hidden_dim,
            decoder_layers,
            batch_first=True,
            dropout=dropout if decoder_layers > 1 else 0.0,
        )
        self.attention = MatchAttention(score, hidden_dim, alignment)
        self.combine = nn.Linear(2 * hidden_dim, embed_dim, bias=False)  # h̃ = tanh(W_c[c; z])
        self.dropout = nn.Dropout(dropout)
        self.out_proj = self.output_projection(embed_dim, tie_output=tie_output)

    # ------------------------------------------------------------------ encoder side

    def encode(
        self, source: Tensor, padding: Tensor, *, copy_ids: Tensor | None = None
    ) -> EncodedSource:
        """Encode a batch of sources.

        Args:
            source: ``(B, S)`` token ids (text) or ``(B, S, F)`` vectors.
            padding: ``(B, S)`` boolean, True at padding; every row has a real position.
            copy_ids: refused: the RNN encoder–decoder has no copy output.

        Returns:
            An :class:`EncodedSource` whose memory ``(B, S, H)`` holds [→h; ←h] per
            position (zeros at padding, which the RNN never reads: packed sequences).
        """
        if copy_ids is not None:
            raise ValueError("the RNN encoder–decoder has no copy output (copy_ids given)")
        self.check_source(source, padding)
        lengths = (~padding).sum(1)
        if bool((lengths == 0).any()):
            raise ValueError("every source needs at least one real (unpadded) position")
        vectors = self.embed_source(source)
        memory = run_packed(self.encoder, self.dropout(vectors), lengths)
        return EncodedSource(memory, padding, None, vectors)

    def initial_state(self, encoded: EncodedSource) -> RecurrentState:
        """The decoder's state before BOS: tanh(W [→h_last; ←h_first]) per decoder layer,
        read off the memory (the top layer's final states in both directions)."""
        memory, padding = encoded.memory, encoded.padding
        rows, half = memory.shape[0], self.hidden_dim // 2
        last = (~padding).sum(1) - 1
        forward = memory[torch.arange(rows, device=memory.device), last, :half]
        backward = memory[:, 0, half:]
        hidden = torch.tanh(self.bridge(torch.cat([forward, backward], dim=-1)))
        hidden = hidden.view(rows, -1, self.hidden_dim).transpose(0, 1).contiguous()
        return RecurrentState(
            hidden=hidden,
            cell=torch.zeros_like(hidden) if self.cell == "lstm" else None,
            feed=memory.new_zeros(rows, self.embed_dim) if self.input_feeding else None,
            keys=self.attention.keys(memory),
        )

    def predict_length(self, encoded: EncodedSource) -> Tensor:
        """Refused: the RNN decoder has no non-autoregressive pass."""
        raise RuntimeError(
            "the RNN encoder–decoder has no length predictor: non-autoregressive decoding "
            'is the transformer\'s (model.architecture = "transformer", seq2seq.nat = true)'
        )

    # ------------------------------------------------------------------ decoder side

    def new_cache(self, capacity: int) -> RecurrentState:
        """An empty recurrent state; its size does not grow with ``capacity``."""
        return RecurrentState()

    def decode(
        self,
        target_in: Tensor,
        encoded: EncodedSource,
        *,
        cache: RecurrentState | None = None,
        num_extended: int = 0,
        **flags: Unpack[DecodeFlags],
    ) -> Seq2SeqOutput:
        """:meth:`EncoderDecoder.decode <selfattn.models.encoder_decoder.EncoderDecoder.decode>`
        by the RNN: ``cache`` is a :class:`RecurrentState`, whose size does not grow;
        ``num_extended`` must be 0 (no copy output); :meth:`decoder_states` reads
        ``flags``."""
        if num_extended:
            raise ValueError("the RNN encoder–decoder has no copy output (num_extended > 0)")
        states = self.decoder_states(target_in, encoded, cache, **flags)
        logits = self.out_proj(states.hidden)
        return Seq2SeqOutput(
            F.log_softmax(score_precision(logits), dim=-1),
            cross_attentions=states.cross_attentions,
        )

    def decoder_states(
        self,
        target_in: Tensor,
        encoded: EncodedSource,
        cache: RecurrentState | None,
        *,
        target_padding: Tensor | None = None,
        causal: bool = True,
        need_weights: bool = False,
    ) -> DecoderStates:
        """The (dropped-out) attentional vectors ``(B, T, E)`` that ``out_proj`` reads.

        ``target_padding`` changes nothing: an RNN reads left to right, so padding after a
        row's end changes none of its real positions. ``causal`` must be True (no
        non-autoregressive pass). ``need_weights``: the attention α̂ as
        ``cross_attentions``, one "layer" of one head, ``(B, 1, T, S)``."""
        if not causal:
            raise ValueError(
                "the RNN decoder reads its outputs left to right: no non-autoregressive pass"
            )
        offset = 0 if cache is None else cache.offset
        self.check_target_in(target_in, encoded, offset)
        state = cache if cache is not None and offset > 0 else self.initial_state(encoded)
        inputs = self.dropout(self.embed_words(target_in))  # (B, T, E)
        if self.input_feeding:
            attentional, weights, state = self._steps(inputs, encoded, state)
        else:
            attentional, weights, state = self._all_at_once(inputs, encoded, state)
        if cache is not None:
            cache.hidden, cache.cell, cache.feed = state.hidden, state.cell, state.feed
            cache.keys, cache.alignment = state.keys, state.alignment
            cache.offset = offset + target_in.shape[1]
        return DecoderStates(
            self.dropout(attentional),
            cross_attentions=[weights.unsqueeze(1)] if need_weights else None,
        )

    def _rnn(self, inputs: Tensor, state: RecurrentState) -> tuple[Tensor, RecurrentState]:
        """Run the decoder RNN over ``inputs`` ``(B, T, ·)`` from ``state``."""
        if self.cell == "lstm":
            out, (hidden, cell) = self.decoder(inputs, (state.hidden, state.cell))
            return out, replace(state, hidden=hidden, cell=cell)
        out, hidden = self.decoder(inputs, state.hidden)
        return out, replace(state, hidden=hidden)

    def _attend(
        self, states: Tensor, encoded: EncodedSource, state: RecurrentState
    ) -> tuple[Tensor, Tensor]:
        """Decoder states ``(B, T, H)`` → attentional vectors ``(B, T, E)`` and α̂; a
        recurrent alignment reads and updates ``state.alignment``."""
        assert state.keys is not None
        context, weights, state.alignment = self.attention(
            states, state.keys, encoded.memory, encoded.padding, state.alignment
        )
        return torch.tanh(self.combine(torch.cat([context, states], dim=-1))), weights

    def _all_at_once(
        self, inputs: Tensor, encoded: EncodedSource, state: RecurrentState
    ) -> tuple[Tensor, Tensor, RecurrentState]:
        """Without input feeding the RNN does not wait for the attention: one call."""
        states, state = self._rnn(inputs, state)
        attentional, weights = self._attend(states, encoded, state)
        return attentional, weights, state

    def _steps(
        self, inputs: Tensor, encoded: EncodedSource, state: RecurrentState
    ) -> tuple[Tensor, Tensor, RecurrentState]:
        """Input feeding: step t's RNN input is [y_{t-1}; h̃_{t-1}], so one step at a time."""
        attentional, weights = [], []
        for t in range(inputs.shape[1]):
            assert state.feed is not None
            step_input = torch.cat([inputs[:, t], state.feed], dim=-1).unsqueeze(1)
            states, state = self._rnn(step_input, state)
            vector, alpha = self._attend(states, encoded, state)
            state.feed = vector[:, 0]
            attentional.append(vector)
            weights.append(alpha)
        if not attentional:  # T = 0
            empty = inputs.new_zeros(inputs.shape[0], 0, self.embed_dim)
            return empty, inputs.new_zeros(inputs.shape[0], 0, encoded.memory.shape[1]), state
        return torch.cat(attentional, dim=1), torch.cat(weights, dim=1), state
