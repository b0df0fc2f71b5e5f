"""Training objectives of the encoder–decoder (lecture 001 §4–5, lecture 003).

Plain functions over :class:`~selfattn.models.seq2seq.Seq2SeqOutput` tensors, composed by
the training code:

* :func:`sequence_nll` — teacher-forced, label-smoothed negative log-likelihood, computed
  from log-probabilities so that the vocabulary, pointer and copy outputs are scored alike;
* :func:`scheduled_sampling_inputs` and :class:`SamplingSchedule` — the exposure-bias fix
  (from :mod:`selfattn.tasks.seq2seq.sampling`, re-exported here);
* :func:`guided_attention_loss` — attention kept near the diagonal, for monotonic
  alignments such as speech (lecture 001 §5.2, Tachibana et al. 2017);
* :func:`coverage_loss` and :func:`attention_budget_loss` — attention that neither returns
  to what it already covered (Tu et al. 2016, See et al. 2017) nor leaves part of the
  source unread (lecture 003 §attention regularisation, Xu et al. 2015);
* :func:`attention_for_regularisers` — which attention the last two regularise.

Every loss averages over real positions only: ``target_out`` holds ``-100`` and the
padding masks hold True where the collator padded.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import Tensor

from selfattn.models.seq2seq_outputs import DecoderStates, Seq2SeqOutput
from selfattn.specials import IGNORE_INDEX
from selfattn.tasks.seq2seq.sampling import (
    SCHEDULES,
    SamplingSchedule,
    ScheduleKind,
    scheduled_sampling_inputs,
)

__all__ = [
    "SCHEDULES",
    "SamplingSchedule",
    "ScheduleKind",
    "attention_budget_loss",
    "attention_for_regularisers",
    "coverage_loss",
    "guided_attention_loss",
    "scheduled_sampling_inputs",
    "sequence_nll",
]


def sequence_nll(
    log_probs: Tensor,
    target_out: Tensor,
    *,
    label_smoothing: float = 0.0,
    all_finite: bool = False,
) -> Tensor:
    """Mean label-smoothed negative log-likelihood over the real target positions.

    With smoothing ε the target distribution is (1 − ε) on the gold id plus ε spread evenly
    over the ids the model can emit, i.e. the *finite* entries of ``log_probs``: the
    pointer output gives −inf to ids that name no source position, and those get no mass
    (so the loss stays finite, and so does its gradient). For a vocabulary output this is
    exactly ``F.cross_entropy(logits, target, label_smoothing=ε)``; with ε = 0 it is
    ``F.nll_loss``. Log-probabilities rather than logits, because the copy output is a
    mixture of two distributions and has no logits.

    The copy output floors impossible ids (extended slots of another example's words) at a
    tiny probability rather than 0, so smoothing counts them; their gradient is zero, so
    that only shifts the loss by a constant.

    Args:
        log_probs: ``(B, T, V)`` log-probabilities.
        target_out: ``(B, T)`` gold ids, ``-100`` at padding.
        label_smoothing: ε in [0, 1).
        all_finite: the caller knows every entry of ``log_probs`` is finite (a vocabulary
            output's log-softmax): the spread term is then a plain mean over the ids, the
            same number without the masks of finite entries, and about half the time
            (benchmarks/README.md).

    Returns:
        Scalar loss; 0 (still differentiable) when no position is real.
    """
    if log_probs.dim() != 3 or log_probs.shape[:2] != target_out.shape:
        raise ValueError(
            f"log_probs must be (B, T, V) and target_out (B, T), got {tuple(log_probs.shape)} "
            f"and {tuple(target_out.shape)}"
        )
    if not 0.0 <= label_smoothing < 1.0:
        raise ValueError(f"label_smoothing must lie in [0, 1), got {label_smoothing}")
    real = target_out != IGNORE_INDEX  # (B, T)
    gold = target_out.masked_fill(~real, 0).unsqueeze(-1)
    # torch.where, never a product with the mask: padding may pick a −inf entry, and
    # 0 · inf is NaN in the forward pass.
    loss = -log_probs.gather(-1, gold).squeeze(-1)  # (B, T)
    if label_smoothing > 0 and all_finite:
        spread = -log_probs.mean(-1)
        loss = (1.0 - label_smoothing) * loss + label_smoothing * spread
    elif label_smoothing > 0:
        finite = torch.isfinite(log_probs)
        spread = -torch.where(finite, log_probs, 0.0).sum(-1) / finite.sum(-1).clamp(min=1)
        loss = (1.0 - label_smoothing) * loss + label_smoothing * spread
    return torch.where(real, loss, 0.0).sum() / real.sum().clamp(min=1)


def guided_attention_loss(
    cross_attentions: Tensor | Sequence[Tensor],
    source_padding: Tensor,
    target_padding: Tensor,
    *,
    sigma: float = 0.2,
) -> Tensor:
    """Penalty on attention far from the diagonal (Tachibana et al. 2017).

    For an example with S_b real source and T_b real target positions,
    W[t, s] = 1 − exp(−(s / S_b − t / T_b)² / (2σ²)) is 0 on the diagonal and near 1 far
    from it; the loss is the mean of A ⊙ W over real (t, s) pairs, heads and layers. For
    tasks whose alignment is monotonic and roughly linear (speech ↔ text, transliteration):
    it teaches the attention to read left to right early, instead of skipping or repeating.

    Args:
        cross_attentions: per decoder layer ``(B, H, T, S)`` (``Seq2SeqOutput``'s
            ``cross_attentions``), or one ``(B, H, T, S)`` or ``(B, T, S)`` map.
        source_padding: ``(B, S)`` True at padding.
        target_padding: ``(B, T)`` True at padding.
        sigma: σ > 0, the width of the tolerated band as a fraction of the lengths.

    Returns:
        Scalar loss. The mean runs over every (t, s) pair, as in the paper, so attention
        rows that sum to 1 keep it below 1 / S_b rather than 1.
    """
    if sigma <= 0:
        raise ValueError(f"sigma must be > 0, got {sigma}")
    maps = [cross_attentions] if isinstance(cross_attentions, Tensor) else list(cross_attentions)
    if not maps:
        raise ValueError("no attention maps: decode with need_weights=True")
    real = _real_pairs(source_padding, target_padding)  # (B, T, S)
    source_len = (~source_padding).sum(1).clamp(min=1)[:, None, None]
    target_len = (~target_padding).sum(1).clamp(min=1)[:, None, None]
    s = torch.arange(source_padding.shape[1], device=real.device)[None, None, :] / source_len
    t = torch.arange(target_padding.shape[1], device=real.device)[None, :, None] / target_len
    weights = 1.0 - torch.exp(-((s - t) ** 2) / (2 * sigma**2))  # (B, T, S)
    total = weights.new_zeros(())
    count = weights.new_zeros(())
    for attention in maps:
        attention = _as_heads(attention, real.shape)  # (B, H, T, S)
        penalty = torch.where(real[:, None], attention.float() * weights[:, None], 0.0)
        total = total + penalty.sum()
        count = count + real.sum() * attention.shape[1]
    return total / count.clamp(min=1)


def coverage_loss(attention: Tensor, source_padding: Tensor, target_padding: Tensor) -> Tensor:
    """Coverage penalty: attending again to source positions already covered.

    The coverage before step t is c_t = Σ_{t' < t} a_{t'}, the attention each source
    position has received so far; the loss is the mean over real target steps of
    Σ_s min(a_t[s], c_t[s]) (See et al. 2017, after Tu et al. 2016's coverage). It is 0
    while every step attends to fresh positions and grows with repeated attention — the
    cure for a decoder that repeats a phrase or copies one word twice.

    Args:
        attention: ``(B, T, S)``, e.g. from :func:`attention_for_regularisers`.
        source_padding: ``(B, S)`` True at padding.
        target_padding: ``(B, T)`` True at padding.

    Returns:
        Scalar loss, between 0 and 1 per step for attention rows that sum to 1.
    """
    attention = _real_attention(attention, source_padding, target_padding)
    coverage = F.pad(attention.cumsum(1)[:, :-1], (0, 0, 1, 0))  # (B, T, S), c_0 = 0
    overlap = torch.minimum(attention, coverage).sum(-1)  # (B, T), 0 at padded steps
    return overlap.sum() / (~target_padding).sum().clamp(min=1)


def attention_budget_loss(
    attention: Tensor,
    source_padding: Tensor,
    target_padding: Tensor,
    *,
    tau: float | None = None,
) -> Tensor:
    """Lecture 003's attention regulariser: Σ_s (τ − Σ_t a_t[s])² over real source positions.

    Each source position should receive about the same total attention τ over the whole
    output — every input read, none read too much (the "doubly stochastic" attention of Xu
    et al. 2015, who take τ = 1). Where :func:`coverage_loss` penalises only repeats, this
    also penalises source positions left unread.

    Args:
        attention: ``(B, T, S)``, e.g. from :func:`attention_for_regularisers`.
        source_padding: ``(B, S)`` True at padding.
        target_padding: ``(B, T)`` True at padding.
        tau: the total attention each source position should receive; ``None``: each
            example's T_b / S_b, the T_b real steps' attention spread evenly over its S_b
            real source positions.

    Returns:
        Scalar loss: the per-example sum over source positions, averaged over the batch.
    """
    attention = _real_attention(attention, source_padding, target_padding)
    received = attention.sum(1)  # (B, S)
    if tau is None:
        target_len = (~target_padding).sum(1, keepdim=True)
        source_len = (~source_padding).sum(1, keepdim=True).clamp(min=1)
        budget: Tensor | float = target_len / source_len  # (B, 1)
    else:
        budget = tau
    squared = torch.where(source_padding, 0.0, (budget - received) ** 2)
    return squared.sum(-1).mean()


def attention_for_regularisers(output: Seq2SeqOutput | DecoderStates) -> Tensor:
    """The one ``(B, T, S)`` attention that coverage-style losses should regularise.

    * Pointer and copy outputs: their own attention over the source. It is what picks
      (or copies) each output token, so repeating or skipping there *is* repeating or
      skipping in the output; See et al. apply coverage to exactly this distribution. In
      pointer mode its rows sum to 1 − p(EOS), so the EOS step barely counts.
    * Vocabulary output: the last decoder layer's cross-attention, averaged over heads.
      The last layer is the one that feeds the prediction; heads are averaged because they
      divide the work (one tracks the aligned word, another the next one, another
      punctuation), and constraining every head to one alignment would undo that split.

    Raises:
        ValueError: a vocabulary output decoded without ``need_weights=True``.
    """
    if isinstance(output, Seq2SeqOutput) and output.pointer_attention is not None:
        return output.pointer_attention
    if not output.cross_attentions:
        raise ValueError(
            "no cross-attention weights: decode with need_weights=True to regularise them"
        )
    return output.cross_attentions[-1].mean(dim=1)


# ---------------------------------------------------------------------- helpers


def _real_pairs(source_padding: Tensor, target_padding: Tensor) -> Tensor:
    """``(B, T, S)`` True where both the target step and the source position are real."""
    if source_padding.shape[0] != target_padding.shape[0]:
        raise ValueError(
            f"source_padding {tuple(source_padding.shape)} and target_padding "
            f"{tuple(target_padding.shape)} disagree on B"
        )
    return ~target_padding[:, :, None] & ~source_padding[:, None, :]


def _as_heads(attention: Tensor, shape: torch.Size) -> Tensor:
    """A ``(B, T, S)`` or ``(B, H, T, S)`` map as ``(B, H, T, S)``, checked against the
    ``(B, T, S)`` of the padding masks."""
    if attention.dim() == 3:
        attention = attention.unsqueeze(1)
    if attention.dim() != 4 or attention.shape[0] != shape[0] or attention.shape[2:] != shape[1:]:
        raise ValueError(
            f"attention {tuple(attention.shape)} does not match the padding masks' "
            f"(B, T, S) = {tuple(shape)}"
        )
    return attention


def _real_attention(attention: Tensor, source_padding: Tensor, target_padding: Tensor) -> Tensor:
    """``(B, T, S)`` float attention with padded steps and positions zeroed."""
    real = _real_pairs(source_padding, target_padding)
    if attention.dim() != 3 or attention.shape != real.shape:
        raise ValueError(
            f"attention must be (B, T, S) = {tuple(real.shape)}, got {tuple(attention.shape)}"
        )
    return torch.where(real, attention.float(), 0.0)
