"""The encoder–decoder Transformer: the third output type, where the model decides how many
labels to emit (lecture 000 §"What is the output?", lecture 001 §3–5, Vaswani et al. 2017).

The encoder reads the source vector set once; the decoder emits the target one token at a
time from BOS until it emits EOS, each step attending to its own earlier outputs (masked
self-attention) and to the encoder's output (cross-attention). Three output layers share
that machinery:

* ``"vocab"`` — a distribution over the target vocabulary (translation). Its projection can
  be tied to the target embedding (Press & Wolf 2017).
* ``"pointer"`` — a distribution over the *source positions* plus EOS: the pointer network
  (Vinyals et al. 2015, lecture 003 §Pointer Network), e.g. for the convex hull, whose
  output "vocabulary" is the input itself. The decoder's input for a pointed position is
  that position's source vector.
* ``"copy"`` — the pointer-generator (See et al. 2017, lecture 001 §Copy Mechanism):
  p_gen · P_vocab + (1 − p_gen) · attention over the source tokens, on a vocabulary
  extended by the source's out-of-vocabulary words, so a word never seen in training can
  be copied from the input.

Every output is returned as log-probabilities, so decoding (greedy, beam, sampling) and
the loss treat the three alike. A length predictor on the encoder output (Gu et al. 2018)
serves non-autoregressive decoding, where every position is produced in one pass from BOS
inputs.

Ids: ``PAD_ID = 0``, ``UNK_ID = 1``, ``BOS_ID = 2``, ``EOS_ID = 3`` in every output space.
In pointer mode id ``NUM_SPECIALS + j`` means source position j.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, ClassVar, Literal, Unpack

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from selfattn.attention.alignment import AlignmentConfig
from selfattn.attention.cache import DecoderCache
from selfattn.models.config import StackConfig
from selfattn.models.conformer import Conformer
from selfattn.models.decoder import Decoder, DecoderOutput
from selfattn.models.encoder import BlockStack, Encoder
from selfattn.models.encoder_decoder import (
    DecodeFlags,
    EncoderDecoderModule,
    check_shared_embeddings,
    check_source_input,
    check_target_vocab,
)
from selfattn.models.pointer import PointerAttention
from selfattn.models.seq2seq_outputs import (
    DecoderStates,
    EncodedSource,
    Seq2SeqOutput,
    score_precision,
)
from selfattn.models.seq2seq_outputs import (  # re-exported: tests read them here
    Seq2SeqAttentionMaps as Seq2SeqAttentionMaps,
)
from selfattn.specials import BOS_ID as BOS_ID  # re-exported: decoding reads it here
from selfattn.specials import EOS_ID, NUM_SPECIALS
from selfattn.specials import PAD_ID as PAD_ID  # re-exported: decoding reads it here
from selfattn.specials import UNK_ID as UNK_ID  # re-exported: tests read it here

OutputKind = Literal["vocab", "pointer", "copy"]
CrossLayers = Literal["last", "matching"]
OUTPUTS: tuple[OutputKind, ...] = ("vocab", "pointer", "copy")
EncoderKind = Literal["transformer", "conformer"]
#: The encoder stacks a seq2seq model can read its source with, by name.
ENCODER_STACKS: dict[str, type[BlockStack]] = {"transformer": Encoder, "conformer": Conformer}
_TINY = 1e-12  # floor of mixed probabilities before the log


def decoder_like(encoder: StackConfig, **changes: Any) -> StackConfig:
    """The decoder configuration that matches ``encoder``: the same sizes, dropout,
    activation, pre/post-LN, score and normaliser, but dense attention (incremental
    decoding keeps a KV cache) that includes each position itself (decoder position t
    reads the previous token: without itself it would not see the last token).
    ``changes`` override any field (``num_layers=…``, ``positional=…``)."""
    return replace(
        encoder,
        **{"attention": "dense", "attention_options": {}, "include_self": True, **changes},
    )


class Seq2SeqTransformer(EncoderDecoderModule):
    """Source embedding → encoder stack → :class:`Decoder` → output layer.

    Args:
        encoder: the encoder stack's whole configuration: sizes, depth, positions
            (``positional=None``: the source is a *set*, e.g. convex-hull points), any
            attention kernel (``"window"`` for long speech), score, normaliser, … Its
            ``max_len`` is the longest source or target sequence.
        decoder: the decoder stack's configuration (:func:`decoder_like` derives one from
            ``encoder``); it must have the encoder's ``embed_dim`` and ``max_len`` and
            dense attention.
        target_vocab_size: ids of the target vocabulary, specials included (unused in
            pointer mode, where the outputs are source positions).
        source_vocab_size: ids of the source vocabulary (text input), or ``None``.
        source_feature_dim: F of each source vector (vector input), or ``None``.
        encoder_kind: the encoder's blocks, a key of :data:`ENCODER_STACKS`:
            ``"transformer"`` or ``"conformer"`` (convolution too, for speech).
        share_embeddings: one embedding table for source and target (text in, vocab or
            copy out, the same vocabulary size).
        tie_output: the vocabulary projection reuses the target embedding matrix.
        output: ``"vocab"``, ``"pointer"`` or ``"copy"`` (module docstring).
        cross_layers: ``"last"``: every decoder layer attends to the encoder's last
            layer; ``"matching"``: decoder layer l attends to encoder layer l (equal depths).
        length_predictor: add a classifier of the target length (for non-autoregressive
            decoding) over lengths 0 … ``max_len``.
        alignment: the decoder cross-attentions' alignment: ``content`` (default),
            location-aware or forward attention (:mod:`selfattn.attention.alignment`).
    """

    #: With a length predictor (``length_predictor``) it decodes every position at once.
    non_autoregressive: ClassVar[bool] = True
    #: A cached step is :meth:`decode`'s: :attr:`decoder`, then :meth:`vocab_log_probs`
    #: (vocab output), so ``selfattn.decoding.lean`` may run it from the layers' weights.
    #: A subclass whose step differs sets it False.
    plain_decoder_step: ClassVar[bool] = True

    def __init__(
        self,
        encoder: StackConfig,
        decoder: StackConfig,
        *,
        target_vocab_size: int,
        source_vocab_size: int | None = None,
        source_feature_dim: int | None = None,
        encoder_kind: EncoderKind = "transformer",
        share_embeddings: bool = False,
        tie_output: bool = True,
        output: OutputKind = "vocab",
        cross_layers: CrossLayers = "last",
        length_predictor: bool = False,
        alignment: AlignmentConfig | None = None,
    ) -> None:
        super().__init__()
        _check_options(
            encoder,
            decoder,
            target_vocab_size=target_vocab_size,
            source_vocab_size=source_vocab_size,
            source_feature_dim=source_feature_dim,
            encoder_kind=encoder_kind,
            share_embeddings=share_embeddings,
            output=output,
            cross_layers=cross_layers,
        )
        embed_dim = encoder.embed_dim
        self.embed_dim, self.max_len = embed_dim, encoder.max_len
        self.output, self.cross_layers = output, cross_layers
        self.encoder_kind = encoder_kind
        self.target_vocab_size = target_vocab_size
        self.init_embeddings(
            embed_dim,
            source_vocab_size=source_vocab_size,
            source_feature_dim=source_feature_dim,
            # Pointer mode embeds only the specials; positions reuse the source vectors.
            target_rows=NUM_SPECIALS if output == "pointer" else target_vocab_size,
            share_embeddings=share_embeddings,
        )
        # BOS / EOS on top of the longest sequence.
        self.encoder: BlockStack = ENCODER_STACKS[encoder_kind](
            replace(encoder, max_len=encoder.max_len + 2)
        )
        self.decoder = Decoder(replace(decoder, max_len=decoder.max_len + 2), alignment=alignment)
        self.out_proj: nn.Linear | None = None
        self.pointer: PointerAttention | None = None
        self.eos_proj: nn.Linear | None = None
        self.gate: nn.Linear | None = None
        if output in ("vocab", "copy"):
            self.out_proj = self.output_projection(embed_dim, tie_output=tie_output)
        if output in ("pointer", "copy"):
            self.pointer = PointerAttention(embed_dim)
        if output == "pointer":
            self.eos_proj = nn.Linear(embed_dim, 1)
        if output == "copy":
            # p_gen from the decoder state, the attended source summary and the input.
            self.gate = nn.Linear(3 * embed_dim, 1)
        self.length_head = nn.Linear(embed_dim, self.max_len + 1) if length_predictor else None

    # ------------------------------------------------------------------ encoder side

    def encode(
        self, source: Tensor, padding: Tensor, *, copy_ids: Tensor | None = None
    ) -> EncodedSource:
        """Encode a batch of sources.

        Args:
            source: ``(B, S)`` token ids (text) or ``(B, S, F)`` vectors.
            padding: ``(B, S)`` boolean, True at padding.
            copy_ids: ``(B, S)`` extended-vocabulary ids of the source tokens (copy mode).

        Returns:
            An :class:`EncodedSource`.
        """
        return self._encode(source, padding, copy_ids=copy_ids, need_weights=False)[0]

    def encode_with_weights(
        self, source: Tensor, padding: Tensor, *, copy_ids: Tensor | None = None
    ) -> tuple[EncodedSource, list[Tensor]]:
        """:meth:`encode`, and the encoder's self-attention weights per layer
        ``(B, H, S, S)``."""
        encoded, weights = self._encode(source, padding, copy_ids=copy_ids, need_weights=True)
        assert weights is not None
        return encoded, weights

    def _encode(
        self, source: Tensor, padding: Tensor, *, copy_ids: Tensor | None, need_weights: bool
    ) -> tuple[EncodedSource, list[Tensor] | None]:
        """:meth:`encode`, and the encoder's self-attention weights when asked for."""
        self.check_source(source, padding)
        if self.output == "copy" and copy_ids is None:
            raise ValueError("the copy output needs copy_ids (the source in the extended vocab)")
        vectors = self.embed_source(source)
        out = self.encoder(vectors, key_padding_mask=padding, need_weights=need_weights)
        memories = None
        if self.cross_layers == "matching":
            memories = out.hidden_states[1:]
            if self.encoder.norm is not None:  # pre-LN: normalise what the decoder reads
                memories = [self.encoder.norm(m) for m in memories[:-1]] + [memories[-1]]
        encoded = EncodedSource(out.last_hidden_state, padding, memories, vectors, copy_ids)
        return encoded, out.attentions

    def predict_length(self, encoded: EncodedSource) -> Tensor:
        """``(B, max_len + 1)`` logits over the target length (without EOS).

        Raises:
            RuntimeError: the model was built without ``length_predictor``.
        """
        if self.length_head is None:
            raise RuntimeError(
                "this model has no length predictor: build it with length_predictor=True "
                "(config seq2seq.nat = true) for non-autoregressive decoding"
            )
        real = (~encoded.padding).unsqueeze(-1).to(encoded.memory.dtype)
        pooled = (encoded.memory * real).sum(1) / real.sum(1).clamp(min=1.0)
        return self.length_head(pooled)

    # ------------------------------------------------------------------ decoder side

    def new_cache(self, capacity: int) -> DecoderCache:
        """An empty key/value cache for ``capacity`` decoder inputs (incremental decoding)."""
        return DecoderCache(capacity=capacity)

    def embed_target(self, ids: Tensor, encoded: EncodedSource) -> Tensor:
        """Decoder input vectors ``(B, T, E)`` for output ids ``(B, T)``."""
        if self.output == "pointer":
            special = ids.clamp(max=NUM_SPECIALS - 1)
            vectors = self.target_embed(special) * self.embed_scale
            position = (ids - NUM_SPECIALS).clamp(min=0)  # (B, T)
            gathered = encoded.source_vectors.gather(
                1, position.unsqueeze(-1).expand(-1, -1, encoded.source_vectors.shape[-1])
            )
            return torch.where((ids >= NUM_SPECIALS).unsqueeze(-1), gathered, vectors)
        return self.embed_words(ids)

    def decode(
        self,
        target_in: Tensor,
        encoded: EncodedSource,
        *,
        cache: DecoderCache | None = None,
        num_extended: int = 0,
        **flags: Unpack[DecodeFlags],
    ) -> Seq2SeqOutput:
        """:meth:`EncoderDecoder.decode <selfattn.models.encoder_decoder.EncoderDecoder.decode>`
        by the Transformer decoder: ``cache`` is a growing
        :class:`~selfattn.attention.cache.DecoderCache`; ``need_weights`` returns the
        self- and cross-attention weights of every layer."""
        x, out = self._run_decoder(target_in, encoded, cache, **flags)
        result = self._output_layer(out.last_hidden_state, x, encoded, num_extended, cache)
        result.cross_attentions = out.cross_attentions
        result.self_attentions = out.self_attentions
        return result

    def decoder_states(
        self, target_in: Tensor, encoded: EncodedSource, cache: Any, **flags: Unpack[DecodeFlags]
    ) -> DecoderStates:
        _, out = self._run_decoder(target_in, encoded, cache, **flags)
        return DecoderStates(out.last_hidden_state, out.cross_attentions, out.self_attentions)

    def _run_decoder(
        self,
        target_in: Tensor,
        encoded: EncodedSource,
        cache: DecoderCache | None,
        **flags: Unpack[DecodeFlags],
    ) -> tuple[Tensor, DecoderOutput]:
        """The decoder's inputs ``(B, T, E)`` and output."""
        offset = 0 if cache is None else cache.offset
        self.check_target_in(target_in, encoded, offset)
        x = self.embed_target(target_in, encoded)
        # Incremental decoding decides once whether the sources need a mask at all.
        memory_padding = encoded.padding if cache is None else cache.memory_mask(encoded.padding)
        memory = encoded.memories if encoded.memories is not None else encoded.memory
        return x, self.decoder(
            x,
            memory,
            memory_key_padding_mask=memory_padding,
            cache=cache,
            self_key_padding_mask=flags.get("target_padding"),
            causal=flags.get("causal", True),
            need_weights=flags.get("need_weights", False),
        )

    def _output_layer(
        self,
        hidden: Tensor,
        inputs: Tensor,
        encoded: EncodedSource,
        num_extended: int,
        cache: DecoderCache | None = None,
    ) -> Seq2SeqOutput:
        """Log-probabilities from the decoder's last hidden states ``(B, T, E)``."""
        if self.output == "vocab":
            return Seq2SeqOutput(self.vocab_log_probs(hidden, cache))
        assert self.pointer is not None
        scores = score_precision(self.pointer(hidden, encoded.memory, encoded.padding))  # (B, T, S)
        if self.output == "pointer":
            assert self.eos_proj is not None
            specials = score_precision(
                hidden.new_full((*hidden.shape[:2], NUM_SPECIALS), float("-inf"))
            )
            specials[..., EOS_ID] = self.eos_proj(hidden).squeeze(-1)
            log_probs = F.log_softmax(torch.cat([specials, scores], dim=-1), dim=-1)
            return Seq2SeqOutput(log_probs, pointer_attention=log_probs[..., NUM_SPECIALS:].exp())
        return self._copy_output(hidden, inputs, scores, encoded, num_extended, cache)

    def vocab_log_probs(self, hidden: Tensor, cache: DecoderCache | None = None) -> Tensor:
        """``(B, T, V)`` the vocabulary output's log-probabilities for decoder states
        ``hidden`` ``(B, T, E)`` (``cache``: a decode's, whose laid-out weights it uses)."""
        return F.log_softmax(score_precision(self._vocab_logits(hidden, cache)), dim=-1)

    def _vocab_logits(self, hidden: Tensor, cache: DecoderCache | None) -> Tensor:
        """``(B, T, V)`` logits of the vocabulary projection.

        Incremental decoding multiplies by a weight laid out once per decode, the largest
        matrix of a decoding step: packed for oneDNN on the CPU in float32
        (:mod:`selfattn.attention.packed_linear`: 3.6× the ``(E, V)`` product's speed at 8
        rows), else as ``(E, V)`` (:attr:`DecoderCache.vocab_weight`): a few decoder rows
        times a matrix read row by row streams memory, where ``nn.Linear`` reads the
        ``(V, E)`` weight (the embedding table, when tied) column-wise.
        """
        assert self.out_proj is not None
        if cache is None:
            return self.out_proj(hidden)
        if cache.linears.applies(hidden, self.out_proj.weight):
            return cache.linears(self.out_proj, hidden)
        if cache.vocab_weight is None:
            cache.vocab_weight = self.out_proj.weight.t().contiguous()
        return hidden @ cache.vocab_weight

    def _copy_output(
        self,
        hidden: Tensor,
        inputs: Tensor,
        scores: Tensor,
        encoded: EncodedSource,
        num_extended: int,
        cache: DecoderCache | None = None,
    ) -> Seq2SeqOutput:
        """p_gen · P_vocab + (1 − p_gen) · Σ_{j: source_j = w} a_j, as log-probabilities."""
        assert self.gate is not None
        assert encoded.copy_ids is not None
        attention = torch.softmax(scores, dim=-1)  # (B, T, S)
        context = attention.to(encoded.memory.dtype) @ encoded.memory  # (B, T, E)
        p_gen = score_precision(torch.sigmoid(self.gate(torch.cat([hidden, context, inputs], -1))))
        vocab = torch.softmax(score_precision(self._vocab_logits(hidden, cache)), dim=-1)
        batch, steps, _ = vocab.shape
        mixed = F.pad(vocab * p_gen, (0, num_extended))
        index = encoded.copy_ids.unsqueeze(1).expand(batch, steps, -1)
        if int(index.max()) >= mixed.shape[-1]:
            raise ValueError(
                f"copy_ids reach {int(index.max())} but the extended vocabulary has "
                f"{mixed.shape[-1]} ids (is num_extended right?)"
            )
        mixed = mixed.scatter_add(-1, index, attention * (1.0 - p_gen))
        return Seq2SeqOutput(mixed.clamp(min=_TINY).log(), pointer_attention=attention)


def _check_options(
    encoder: StackConfig,
    decoder: StackConfig,
    *,
    target_vocab_size: int,
    source_vocab_size: int | None,
    source_feature_dim: int | None,
    encoder_kind: str,
    share_embeddings: bool,
    output: str,
    cross_layers: str,
) -> None:
    """One-line errors for options of :class:`Seq2SeqTransformer` that cannot work together."""
    check_source_input(source_vocab_size, source_feature_dim)
    if encoder_kind not in ENCODER_STACKS:
        raise ValueError(
            f"unknown encoder_kind {encoder_kind!r}; choose one of {', '.join(ENCODER_STACKS)}"
        )
    if output not in OUTPUTS:
        raise ValueError(f"unknown output {output!r}; choose one of {', '.join(OUTPUTS)}")
    if output == "copy" and source_vocab_size is None:
        raise ValueError("the copy output copies source *tokens*: it needs text input")
    if output != "pointer":
        check_target_vocab(target_vocab_size)
    if (decoder.embed_dim, decoder.max_len) != (encoder.embed_dim, encoder.max_len):
        raise ValueError(
            f"the decoder's embed_dim and max_len ({decoder.embed_dim}, {decoder.max_len}) "
            f"must be the encoder's ({encoder.embed_dim}, {encoder.max_len})"
        )
    if cross_layers == "matching" and encoder.num_layers != decoder.num_layers:
        raise ValueError(
            "cross_layers='matching' needs as many encoder as decoder layers, got "
            f"{encoder.num_layers} and {decoder.num_layers}"
        )
    check_shared_embeddings(
        share_embeddings, source_vocab_size, target_vocab_size, pointer=output == "pointer"
    )
