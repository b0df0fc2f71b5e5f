"""Greedy decoding (lecture 001 §3): from BOS, emit the most probable token until EOS.

:func:`autoregressive` is the loop that greedy decoding and sampling share; they differ
only in how a token is chosen from the step's distribution. The whole batch advances one
step per decoder call; a row that emits EOS is dropped from the batch (its cache rows
too), so the remaining rows stop paying for it.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

from selfattn.decoding.common import (
    DecodeResult,
    banned_ids,
    check_max_len,
    constrain,
    rows_to_lists,
)
from selfattn.decoding.incremental import IncrementalDecoder
from selfattn.models.seq2seq import EOS_ID, PAD_ID, EncodedSource, Seq2SeqTransformer

#: ``(R, V)`` allowed log-probabilities (−inf where banned) → ``(R,)`` chosen ids.
ChooseFn = Callable[[Tensor], Tensor]


@torch.no_grad()
def autoregressive(
    model: Seq2SeqTransformer,
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
        max_len: most tokens per example (EOS not counted); after ``max_len`` tokens EOS
            is forced, so each row's score is that of a complete sequence.
        min_len: EOS is banned before this many tokens.
        num_extended: copy mode: the batch's out-of-vocabulary extension.
        use_cache: incremental decoding with a KV cache (False: recompute the prefix).

    Returns:
        A :class:`DecodeResult`.
    """
    check_max_len(model, max_len, min_len)
    batch, device = encoded.memory.shape[0], encoded.memory.device
    state = IncrementalDecoder(model, encoded, num_extended=num_extended, use_cache=use_cache)
    ids = torch.full((batch, max_len + 1), PAD_ID, dtype=torch.long, device=device)
    step_log_probs = torch.zeros(batch, max_len + 1, device=device)
    lengths = torch.full((batch,), max_len, dtype=torch.long, device=device)
    finished = torch.zeros(batch, dtype=torch.bool, device=device)
    live = torch.arange(batch, device=device)  # the example behind each decoder row
    banned: Tensor | None = None
    steps = 0
    for step in range(max_len + 1):
        log_probs = state.log_probs()  # (R, V)
        if banned is None:  # V is known only now (pointer: 4 + S; copy: V + extension)
            banned = banned_ids(model, encoded, log_probs.shape[-1], num_extended)
        allowed = constrain(log_probs, banned[live], step=step, min_len=min_len, max_len=max_len)
        token = choose(allowed)
        ids[live, step] = token
        step_log_probs[live, step] = log_probs.gather(1, token.unsqueeze(1)).squeeze(1)
        steps = step + 1
        ended = token == EOS_ID
        if bool(ended.any()):
            lengths[live[ended]] = step
            finished[live[ended]] = step < max_len
            keep = (~ended).nonzero().squeeze(1)
            live, token = live[keep], token[keep]
            if live.numel() == 0:
                break
            state.select(keep)
        state.append(token)
    log_prob = step_log_probs.sum(dim=1)
    return DecodeResult(
        tokens=rows_to_lists(ids, lengths),
        log_prob=log_prob,
        score=log_prob.clone(),
        step_log_probs=step_log_probs[:, :steps],
        finished=finished,
    )


def greedy(
    model: Seq2SeqTransformer,
    encoded: EncodedSource,
    *,
    max_len: int,
    min_len: int = 0,
    num_extended: int = 0,
    use_cache: bool = True,
) -> DecodeResult:
    """Greedy decoding: the argmax token at every step.

    Args:
        model: the encoder–decoder, in eval mode.
        encoded: ``(B, S, E)`` from ``model.encode``.
        max_len: most tokens per example (EOS not counted), at most ``model.max_len``.
        min_len: EOS is banned before this many tokens (e.g. to time a fixed length).
        num_extended: copy mode: the batch's out-of-vocabulary extension.
        use_cache: incremental decoding with a KV cache; False recomputes the whole
            prefix every step (the reference; same tokens, log-probs within float error).

    Returns:
        A :class:`DecodeResult`; ``score`` equals ``log_prob``.

    Raises:
        ValueError: ``max_len`` outside 1 … ``model.max_len`` or ``min_len`` outside
            0 … ``max_len``.
    """
    return autoregressive(
        model,
        encoded,
        lambda allowed: allowed.argmax(dim=-1),
        max_len=max_len,
        min_len=min_len,
        num_extended=num_extended,
        use_cache=use_cache,
    )
