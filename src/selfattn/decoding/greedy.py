"""Greedy decoding (lecture 001 §3): from BOS, emit the most probable token until EOS.

:func:`autoregressive` is the loop that greedy decoding and sampling share; they differ
only in how a token is chosen from the step's distribution. The whole batch advances one
step per decoder call. The chosen ids and their log-probabilities are written into
preallocated buffers on the device, and a row that emitted EOS runs on (what it emits
afterwards is masked out at the end): only every
:func:`~selfattn.decoding.common.check_interval` steps does the loop read a flag back
from the device, to stop once every row has ended or to drop the ended rows from the
batch (their cache rows too), so the remaining rows stop paying for them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Required, TypedDict, Unpack

import torch
from torch import Tensor

from selfattn.decoding.common import (
    DecodeResult,
    banned_columns,
    banned_ids,
    check_interval,
    check_max_len,
    constrain,
    rows_to_lists,
    score_dtype,
)
from selfattn.decoding.incremental import IncrementalDecoder
from selfattn.models.encoder_decoder import EncoderDecoder
from selfattn.models.seq2seq_outputs import EncodedSource
from selfattn.specials import EOS_ID, PAD_ID

#: ``(R, V)`` allowed log-probabilities (−inf where banned) → ``(R,)`` chosen ids.
ChooseFn = Callable[[Tensor], Tensor]


class DecodeLimits(TypedDict, total=False):
    """The keyword arguments that :func:`greedy` and :func:`~selfattn.decoding.sample`
    hand to :func:`autoregressive` as they are.

    Attributes:
        max_len: most tokens per example (EOS not counted), 1 … ``model.max_len``; after
            ``max_len`` tokens EOS is forced, so each row's score is that of a complete
            sequence. Required.
        min_len: EOS is banned before this many tokens (e.g. to time a fixed length);
            default 0.
        num_extended: copy mode: the batch's out-of-vocabulary extension; default 0.
        use_cache: incremental decoding with a KV cache (default); False recomputes the
            whole prefix every step (the reference; same tokens, log-probs within float
            error).
    """

    max_len: Required[int]
    min_len: int
    num_extended: int
    use_cache: bool


@torch.no_grad()
def autoregressive(
    model: EncoderDecoder,
    encoded: EncodedSource,
    choose: ChooseFn,
    *,
    max_len: int,
    min_len: int = 0,
    num_extended: int = 0,
    use_cache: bool = True,
) -> DecodeResult:
    """Decode every example from BOS, one ``choose`` per step, until EOS or ``max_len``.

    Args:
        model: the encoder–decoder, in eval mode.
        encoded: ``(B, S, E)`` from ``model.encode``.
        choose: picks each row's next id from its allowed log-probabilities.
        max_len: see :class:`DecodeLimits`.
        min_len: see :class:`DecodeLimits`.
        num_extended: see :class:`DecodeLimits`.
        use_cache: see :class:`DecodeLimits`.

    Returns:
        A :class:`DecodeResult`.
    """
    check_max_len(model, max_len, min_len)
    batch, device = encoded.memory.shape[0], encoded.memory.device
    state = IncrementalDecoder(
        model, encoded, max_len=max_len, num_extended=num_extended, use_cache=use_cache
    )
    # Per example (filled as rows are dropped and at the end), then per decoder row.
    ids = torch.full((batch, max_len + 1), PAD_ID, dtype=torch.long, device=device)
    step_log_probs = torch.zeros(batch, max_len + 1, dtype=score_dtype(encoded), device=device)
    row_ids, row_log_probs = ids.clone(), step_log_probs.clone()
    ended = torch.zeros(batch, dtype=torch.bool, device=device)
    live = torch.arange(batch, device=device)  # the example behind each decoder row
    banned: Tensor | None = None
    columns: Tensor | None = None  # the ids every row bans, when that is all it bans
    interval = check_interval(device)
    for step in range(max_len + 1):
        log_probs = state.log_probs()  # (R, V)
        if banned is None:  # V is known only now (pointer: 4 + S; copy: V + extension)
            banned = banned_ids(model, encoded, log_probs.shape[-1], num_extended)
            columns = banned_columns(banned)
        allowed = constrain(
            log_probs,
            banned if columns is None else columns,
            step=step,
            min_len=min_len,
            max_len=max_len,
        )
        token = choose(allowed)
        row_ids[:, step] = token
        row_log_probs[:, step] = log_probs.gather(1, token.unsqueeze(1)).squeeze(1)
        ended |= token == EOS_ID
        if step == max_len:
            break
        if (step + 1) % interval == 0:
            num_ended = int(ended.sum())
            if num_ended == ended.numel():
                break
            if num_ended:
                gone, keep = ended.nonzero().squeeze(1), (~ended).nonzero().squeeze(1)
                ids[live[gone]] = row_ids[gone]
                step_log_probs[live[gone]] = row_log_probs[gone]
                live, row_ids, row_log_probs = live[keep], row_ids[keep], row_log_probs[keep]
                ended, token, banned = ended[keep], token[keep], banned[keep]
                state.select(keep)
        state.append(token)
    ids[live], step_log_probs[live] = row_ids, row_log_probs
    return _result(ids, step_log_probs, max_len)


def _result(ids: Tensor, step_log_probs: Tensor, max_len: int) -> DecodeResult:
    """The decoded batch from each example's ids ``(B, max_len + 1)`` and their
    log-probabilities, both holding whatever an ended row emitted after its first EOS."""
    lengths = (ids == EOS_ID).int().argmax(dim=1)  # every row has an EOS: forced at max_len
    after = torch.arange(ids.shape[1], device=ids.device) > lengths.unsqueeze(1)
    step_log_probs = step_log_probs.masked_fill(after, 0.0)
    log_prob = step_log_probs.sum(dim=1)
    steps = int(lengths.max()) + 1 if lengths.numel() else 0
    return DecodeResult(
        tokens=rows_to_lists(ids, lengths),
        log_prob=log_prob,
        score=log_prob.clone(),
        step_log_probs=step_log_probs[:, :steps],
        finished=lengths < max_len,
    )


def greedy(
    model: EncoderDecoder, encoded: EncodedSource, **limits: Unpack[DecodeLimits]
) -> DecodeResult:
    """Greedy decoding: the argmax token at every step.

    Args:
        model: the encoder–decoder, in eval mode.
        encoded: ``(B, S, E)`` from ``model.encode``.
        limits: ``max_len`` (required), ``min_len``, ``num_extended``, ``use_cache``: see
            :class:`DecodeLimits`.

    Returns:
        A :class:`DecodeResult`; ``score`` equals ``log_prob``.

    Raises:
        ValueError: ``max_len`` outside 1 … ``model.max_len`` or ``min_len`` outside
            0 … ``max_len``.
    """
    return autoregressive(model, encoded, lambda allowed: allowed.argmax(dim=-1), **limits)
