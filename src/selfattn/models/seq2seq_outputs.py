"""What the encoder–decoder (:class:`~selfattn.models.seq2seq.Seq2SeqTransformer`) hands
out: the encoded source every decoding step reuses, the log-probabilities of a decoding
step, and the attention maps of a teacher-forced batch."""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch
from torch import Tensor


def score_precision(t: Tensor) -> Tensor:
    """``t`` in at least float32, the precision output probabilities are computed in:
    bf16 / fp16 logits are upcast (their sums would lose the ranking), a float64 model's
    stay float64 (its exact tests, and CPU and GPU decodes that agree to float64)."""
    return t.to(torch.promote_types(t.dtype, torch.float32))


@dataclass
class EncodedSource:
    """The encoder's view of a batch of sources, reused by every decoding step.

    Attributes:
        memory: ``(B, S, E)`` the encoder's last layer.
        padding: ``(B, S)`` boolean, True at padding.
        memories: one ``(B, S, E)`` tensor per decoder layer when each decoder layer reads
            its own encoder layer (``cross_layers="matching"``), else ``None``.
        source_vectors: ``(B, S, E)`` the embedded source (pointer-mode decoder inputs).
        copy_ids: ``(B, S)`` long, each source token's id in the extended vocabulary
            (copy mode), else ``None``.
    """

    memory: Tensor
    padding: Tensor
    memories: list[Tensor] | None
    source_vectors: Tensor
    copy_ids: Tensor | None = None

    def index_select(self, index: Tensor) -> EncodedSource:
        """Rows ``index`` of every tensor (repeat sources for beams, or reorder them)."""

        def pick(t: Tensor | None) -> Tensor | None:
            return None if t is None else t.index_select(0, index)

        return replace(
            self,
            memory=self.memory.index_select(0, index),
            padding=self.padding.index_select(0, index),
            memories=None
            if self.memories is None
            else [m.index_select(0, index) for m in self.memories],
            source_vectors=self.source_vectors.index_select(0, index),
            copy_ids=pick(self.copy_ids),
        )


@dataclass
class Seq2SeqOutput:
    """What :meth:`Seq2SeqTransformer.decode` returns.

    Attributes:
        log_probs: ``(B, T, V)`` log-probabilities of the next token at each position; V is
            the vocabulary size (vocab), ``NUM_SPECIALS + S`` (pointer) or the vocabulary
            extended by ``num_extended`` source words (copy).
        cross_attentions: per decoder layer ``(B, H, T, S)`` when weights were requested.
        pointer_attention: ``(B, T, S)`` the attention over source positions of the
            pointer / copy output, else ``None``.
        self_attentions: per decoder layer ``(B, H, T, T)`` when weights were requested.
    """

    log_probs: Tensor
    cross_attentions: list[Tensor] | None = None
    pointer_attention: Tensor | None = None
    self_attentions: list[Tensor] | None = None


@dataclass
class DecoderStates:
    """What ``decode_states`` returns: a vocabulary-output decoder's teacher-forced pass
    up to, not through, its output projection ``out_proj``, for a loss that applies the
    projection itself (:mod:`selfattn.train.fused_ce`, which never holds the logits).

    Attributes:
        hidden: ``(B, T, E)`` the inputs of ``out_proj`` at each position.
        cross_attentions: per decoder layer ``(B, H, T, S)`` when weights were requested.
        self_attentions: per decoder layer ``(B, H, T, T)`` when weights were requested.
    """

    hidden: Tensor
    cross_attentions: list[Tensor] | None = None
    self_attentions: list[Tensor] | None = None


@dataclass
class Seq2SeqAttentionMaps:
    """Every attention of an encoder–decoder on one teacher-forced batch, per layer.

    Attributes:
        encoder: encoder self-attention, ``num_encoder_layers`` × ``(B, H, S, S)``.
        decoder: decoder masked self-attention, ``num_decoder_layers`` × ``(B, H, T, T)``
            (zero above the diagonal). Both are empty for the RNN encoder–decoder, whose
            only attention is ``cross`` (one layer of one head).
        cross: decoder-to-source cross-attention, ``num_decoder_layers`` ×
            ``(B, H, T, S)``.
    """

    encoder: list[Tensor]
    decoder: list[Tensor]
    cross: list[Tensor]
