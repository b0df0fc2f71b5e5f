"""Non-autoregressive decoding (lecture 001 §3.2.3; Gu et al. 2018).

The NAT decoder reads a whole row of BOS tokens at once and emits every output position
in one pass, without masking the future: as fast for a long output as for a short one.
How many positions to emit is decided first, by a classifier on the encoder's output
(``Seq2SeqTransformer.predict_length``), so EOS is never needed (and never emitted). That
classifier is also a control the autoregressive decoder lacks, the lecture's
text-to-speech example: "to speak twice as fast, divide the predicted length by two"
(``length_scale=0.5``).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from selfattn.decoding.common import NEG_INF, DecodeResult, banned_ids, rows_to_lists
from selfattn.models.encoder_decoder import EncoderDecoder
from selfattn.models.seq2seq_outputs import EncodedSource
from selfattn.specials import BOS_ID, EOS_ID, PAD_ID


def nat_lengths(lengths: Tensor, length_scale: float, max_len: int) -> Tensor:
    """round(``lengths`` × ``length_scale``), clamped to 1 … ``max_len`` (``(B,)`` long).

    ``torch.round`` rounds halves to even (2.5 → 2), as Python's ``round`` does.
    """
    scaled = torch.round(lengths.to(torch.float64) * length_scale).long()
    return scaled.clamp(min=1, max=max_len)


@torch.no_grad()
def non_autoregressive(
    model: EncoderDecoder,
    encoded: EncodedSource,
    *,
    length_scale: float = 1.0,
    lengths: Tensor | Sequence[int] | None = None,
    num_extended: int = 0,
) -> DecodeResult:
    """Every output position at once: BOS inputs, no causal mask, argmax per position.

    Args:
        model: the encoder–decoder, in eval mode; it needs a length predictor unless
            ``lengths`` are given.
        encoded: ``(B, S, E)`` from ``model.encode``.
        length_scale: factor on the lengths (0.5: half as many tokens, "twice as fast").
        lengths: ``(B,)`` lengths to use instead of the predicted ones (still scaled).
        num_extended: copy mode: the batch's out-of-vocabulary extension.

    Returns:
        A :class:`DecodeResult` with round(length × ``length_scale``) tokens per example
        (at least 1, at most ``model.max_len``); no EOS, so ``finished`` is all True.

    Raises:
        ValueError: ``length_scale`` ≤ 0, or ``lengths`` not ``(B,)`` of values
            0 … ``model.max_len``.
        RuntimeError: no ``lengths`` and a model without a length predictor.
    """
    if not length_scale > 0.0:
        raise ValueError(f"length_scale must be > 0, got {length_scale}")
    batch, device = encoded.memory.shape[0], encoded.memory.device
    if lengths is None:
        base = model.predict_length(encoded).argmax(dim=-1)  # (B,) in 0 … max_len
    else:
        base = torch.as_tensor(lengths, dtype=torch.long, device=device)
        if base.shape != (batch,) or bool((base < 0).any() | (base > model.max_len).any()):
            raise ValueError(
                f"lengths must be {batch} values in 0…{model.max_len}, got {base.tolist()}"
            )
    target_lengths = nat_lengths(base, length_scale, model.max_len)
    width = int(target_lengths.max())
    padding = torch.arange(width, device=device)[None, :] >= target_lengths[:, None]  # (B, T)
    target_in = torch.full((batch, width), BOS_ID, dtype=torch.long, device=device)
    target_in = target_in.masked_fill(padding, PAD_ID)
    log_probs = model.decode(
        target_in,
        encoded,
        target_padding=padding,
        causal=False,
        num_extended=num_extended,
    ).log_probs  # (B, T, V)
    banned = banned_ids(model, encoded, log_probs.shape[-1], num_extended)
    banned[:, EOS_ID] = True  # the length predictor decides where the output ends
    ids = log_probs.masked_fill(banned.unsqueeze(1), NEG_INF).argmax(dim=-1)  # (B, T)
    step_log_probs = log_probs.gather(-1, ids.unsqueeze(-1)).squeeze(-1).masked_fill(padding, 0)
    log_prob = step_log_probs.sum(dim=1)
    return DecodeResult(
        tokens=rows_to_lists(ids, target_lengths),
        log_prob=log_prob,
        score=log_prob.clone(),
        step_log_probs=step_log_probs,
        finished=torch.ones(batch, dtype=torch.bool, device=device),
    )
