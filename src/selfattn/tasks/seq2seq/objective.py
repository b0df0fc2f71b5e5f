"""The training signal of one seq2seq batch (lecture 001 §3–5).

:class:`Seq2SeqObjective` composes it:

* teacher forcing — the decoder reads the gold previous tokens — with label-smoothed
  negative log-likelihood; with ``scheduled_sampling`` some of those inputs are replaced
  by the model's own predictions, more as training goes on (the exposure-bias fix);
* optional guided-attention and coverage terms on the attention;
* optional non-autoregressive pass: the target length predicted from the encoder, every
  position decoded at once from BOS inputs.

Dev evaluation during training is teacher-forced token accuracy (cheap, no decoding);
BLEU, chrF and exact match come from decoding (:mod:`selfattn.tasks.seq2seq.task`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Unpack

import torch
import torch.nn.functional as F
from torch import Tensor

from selfattn.config.sections import Config, FusedSetting
from selfattn.data.batching.seq2seq_collate import Seq2SeqBatch
from selfattn.models.encoder_decoder import DecodeFlags
from selfattn.models.seq2seq import BOS_ID, PAD_ID, EncodedSource
from selfattn.models.seq2seq_builder import Seq2SeqModel
from selfattn.models.seq2seq_options import Seq2SeqConfig
from selfattn.models.seq2seq_outputs import DecoderStates, Seq2SeqOutput
from selfattn.specials import IGNORE_INDEX
from selfattn.tasks.metrics import eval_batches
from selfattn.tasks.seq2seq.losses import (
    attention_for_regularisers,
    coverage_loss,
    guided_attention_loss,
    sequence_nll,
)
from selfattn.tasks.seq2seq.sampling import SamplingSchedule, scheduled_sampling_inputs
from selfattn.train.fused_ce import fuses, linear_cross_entropy


def encode_batch(model: Seq2SeqModel, batch: Seq2SeqBatch) -> EncodedSource:
    """The encoder's output for a batch."""
    return model.encode(batch.source, batch.source_padding, copy_ids=batch.copy_ids)


@dataclass
class Seq2SeqObjective:
    """The loss of one seq2seq batch, and teacher-forced evaluation.

    Args:
        config: the ``[seq2seq]`` section.
        label_smoothing: ε of the NLL terms.
        fused_cross_entropy: ``train.fused_cross_entropy``: whether the training NLL
            applies the vocabulary projection itself, in chunks of rows
            (:func:`~selfattn.train.fused_ce.linear_cross_entropy`), instead of reading
            the decoder's ``(B, T, V)`` log-probabilities; the same loss and gradients.
    """

    config: Seq2SeqConfig
    label_smoothing: float = 0.0
    fused_cross_entropy: FusedSetting = "off"

    @classmethod
    def of(cls, config: Config) -> Seq2SeqObjective:
        """The objective of a run's ``config``."""
        train = config.train
        return cls(config.seq2seq, train.label_smoothing, train.fused_cross_entropy)

    def __post_init__(self) -> None:
        kind = self.config.scheduled_sampling
        self.schedule = (
            None
            if kind == "none"
            else SamplingSchedule(
                kind=kind, max_ratio=self.config.sampling_max, steps=self.config.sampling_steps
            )
        )

    def sampling_ratio(self, step: int) -> float:
        """Probability of feeding the model's own token at optimizer step ``step``."""
        return 0.0 if self.schedule is None else self.schedule.ratio(step)

    def loss(self, model: Seq2SeqModel, batch: Seq2SeqBatch, step: int) -> Tensor:
        """The training loss of ``batch`` at optimizer step ``step``."""
        config = self.config
        encoded = encode_batch(model, batch)
        target_in = batch.target_in
        ratio = self.sampling_ratio(step)
        if ratio > 0:
            target_in = scheduled_sampling_inputs(model, encoded, batch, ratio)
        # Cross-attention weights cost the fused kernel: ask only when a term reads them
        # (coverage reads the pointer / copy attention when the model has one).
        needs_weights = config.guided_attention > 0 or (
            config.coverage > 0 and model.output == "vocab"
        )
        out, loss = self.decode_nll(
            model,
            target_in,
            encoded,
            batch.target_out,
            need_weights=needs_weights,
            num_extended=batch.num_extended,
        )
        if config.guided_attention > 0:
            assert out.cross_attentions is not None
            loss = loss + config.guided_attention * guided_attention_loss(
                out.cross_attentions,
                batch.source_padding,
                batch.target_padding,
                sigma=config.guided_sigma,
            )
        if config.coverage > 0:
            loss = loss + config.coverage * coverage_loss(
                attention_for_regularisers(out), batch.source_padding, batch.target_padding
            )
        if config.nat:
            loss = loss + config.nat_weight * self.nat_loss(model, encoded, batch)
        return loss

    def nat_loss(self, model: Seq2SeqModel, encoded: EncodedSource, batch: Seq2SeqBatch) -> Tensor:
        """Length-prediction cross-entropy plus the NLL of one non-autoregressive pass."""
        lengths = (~batch.target_padding).sum(1) - 1  # (B,), targets without EOS
        length_logits = model.predict_length(encoded)
        length_loss = F.cross_entropy(
            length_logits.float(), lengths.clamp(max=length_logits.shape[-1] - 1)
        )
        # The batch's width, not lengths.max(): reading that would wait for the device
        # mid-step, and the collator pads targets to the longest (EOS included), so the
        # two agree; wider padding would add columns that are padding in every row.
        inputs, padding = nat_inputs(lengths, width=batch.target_padding.shape[1] - 1)
        targets = batch.target_out[:, : inputs.shape[1]].masked_fill(padding, IGNORE_INDEX)
        _, nll = self.decode_nll(
            model,
            inputs,
            encoded,
            targets,
            target_padding=padding,
            causal=False,
            num_extended=batch.num_extended,
        )
        return nll + length_loss

    def fuses(self, model: Seq2SeqModel) -> bool:
        """Whether the training NLL of ``model`` is the fused one."""
        return fuses(self.fused_cross_entropy, model.output, model.target_vocab_size)

    def decode_nll(
        self,
        model: Seq2SeqModel,
        target_in: Tensor,
        encoded: EncodedSource,
        target_out: Tensor,
        *,
        num_extended: int = 0,
        **flags: Unpack[DecodeFlags],
    ) -> tuple[Seq2SeqOutput | DecoderStates, Tensor]:
        """Decode ``target_in`` (teacher forcing) and score ``target_out``: the decoder's
        output (its attention maps) and the label-smoothed NLL, fused or plain; ``flags``:
        :class:`~selfattn.models.encoder_decoder.DecodeFlags`."""
        if self.fuses(model):
            states = model.decode_states(target_in, encoded, **flags)
            projection = model.out_proj
            assert projection is not None
            return states, linear_cross_entropy(
                states.hidden,
                projection.weight,
                projection.bias,
                target_out,
                label_smoothing=self.label_smoothing,
            )
        out = model.decode(target_in, encoded, num_extended=num_extended, **flags)
        nll = sequence_nll(
            out.log_probs,
            target_out,
            label_smoothing=self.label_smoothing,
            all_finite=finite_log_probs(model),
        )
        return out, nll

    @torch.no_grad()
    def evaluate(
        self,
        model: Seq2SeqModel,
        batches: Iterable[Seq2SeqBatch],
        *,
        device: torch.device | str | None = None,
    ) -> dict[str, float]:
        """Teacher-forced loss and token accuracy (EOS included) over ``batches``."""
        return evaluate_teacher_forced(model, batches, device=device)


def finite_log_probs(model: Seq2SeqModel) -> bool:
    """Whether every log-probability ``model`` gives is finite: a vocabulary output's
    log-softmax, or the copy output's mixture (floored above 0); the pointer output gives
    −inf to the ids that name no source position."""
    return model.output != "pointer"


def nat_inputs(lengths: Tensor, width: int | None = None) -> tuple[Tensor, Tensor]:
    """BOS at each of a row's ``lengths[b]`` positions, PAD after: ``(ids, padding)``,
    ``width`` columns (default: the longest row's)."""
    if width is None:
        width = int(lengths.max()) if lengths.numel() else 0
    padding = torch.arange(width, device=lengths.device)[None, :] >= lengths[:, None]
    ids = torch.full(padding.shape, BOS_ID, dtype=torch.long, device=lengths.device)
    return ids.masked_fill(padding, PAD_ID), padding


@torch.no_grad()
def evaluate_teacher_forced(
    model: Seq2SeqModel,
    batches: Iterable[Seq2SeqBatch],
    *,
    device: torch.device | str | None = None,
) -> dict[str, float]:
    """``{"loss", "accuracy", "count"}``: NLL and next-token accuracy under teacher
    forcing, over every real target position (EOS included)."""
    loss_sum, correct, count = 0.0, 0, 0
    for batch in eval_batches(model, batches, device):
        out = model(
            batch.source,
            batch.source_padding,
            batch.target_in,
            copy_ids=batch.copy_ids,
            num_extended=batch.num_extended,
        )
        real = batch.target_out != IGNORE_INDEX
        n = int(real.sum())
        loss_sum += float(sequence_nll(out.log_probs, batch.target_out)) * n
        correct += int((out.log_probs.argmax(-1)[real] == batch.target_out[real]).sum())
        count += n
    return {
        "loss": loss_sum / max(count, 1),
        "accuracy": correct / max(count, 1),
        "count": float(count),
    }


__all__ = [
    "Seq2SeqObjective",
    "encode_batch",
    "evaluate_teacher_forced",
    "nat_inputs",
]
