"""What every decoder shares: the result type, argument checks, and which ids may be emitted.

Every decoding function returns a :class:`DecodeResult`. Scores are sums of the *model's*
log-probabilities of the emitted tokens (EOS included when it was emitted), whatever the
search did to choose them (temperature, top-k, n-gram blocking), so results of different
decoders can be compared on one scale.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from selfattn.models.encoder_decoder import EncoderDecoder
from selfattn.models.seq2seq_outputs import EncodedSource
from selfattn.specials import BOS_ID, EOS_ID, NUM_SPECIALS, PAD_ID

NEG_INF = float("-inf")


@dataclass
class Hypothesis:
    """One finished output sequence (an entry of beam search's n-best list).

    Attributes:
        tokens: output ids, without BOS and EOS.
        log_prob: sum of the model's log-probabilities of ``tokens`` and the final EOS.
        score: what the search ranked by (``log_prob`` divided by the length penalty).
    """

    tokens: list[int]
    log_prob: float
    score: float


@dataclass
class DecodeResult:
    """The decoded batch, one entry per example.

    Attributes:
        tokens: per example, the output ids without BOS and EOS (in pointer mode id
            ``NUM_SPECIALS + j`` is source position j; in copy mode ids ≥ the vocabulary
            size are the example's out-of-vocabulary source words).
        log_prob: ``(B,)`` sum of the model's log-probabilities of the tokens and of the
            final EOS (autoregressive decoders; NAT emits no EOS).
        score: ``(B,)`` what the decoder ranked by: ``log_prob`` for greedy, sampling and
            NAT, ``log_prob`` / length penalty for beam search.
        step_log_probs: ``(B, N)`` the model's log-probability of each emitted id (EOS
            included, except for NAT), 0 after each row's end; N is the longest row's
            step count.
        finished: ``(B,)`` True where the model chose EOS itself (False: cut at
            ``max_len``, EOS forced). Always True for NAT, whose length is predicted.
        nbest: beam search with ``nbest=True``: per example its finished hypotheses,
            best first; else ``None``.
    """

    tokens: list[list[int]]
    log_prob: Tensor
    score: Tensor
    step_log_probs: Tensor
    finished: Tensor
    nbest: list[list[Hypothesis]] | None = None

    @property
    def lengths(self) -> list[int]:
        """Number of output tokens of each example (EOS not counted)."""
        return [len(row) for row in self.tokens]

    def padded(self, pad_id: int = PAD_ID) -> Tensor:
        """``(B, max length)`` long tensor of the tokens, ``pad_id`` after each row's end."""
        width = max(self.lengths, default=0)
        out = torch.full((len(self.tokens), width), pad_id, dtype=torch.long)
        for b, row in enumerate(self.tokens):
            out[b, : len(row)] = torch.tensor(row, dtype=torch.long)
        return out


def rows_to_lists(ids: Tensor, lengths: Tensor) -> list[list[int]]:
    """``(B, N)`` ids and ``(B,)`` lengths → per row its first ``lengths[b]`` ids."""
    return [row[:n] for row, n in zip(ids.tolist(), lengths.tolist(), strict=True)]


def check_max_len(model: EncoderDecoder, max_len: int, min_len: int = 0) -> None:
    """Refuse lengths the model cannot decode.

    Raises:
        ValueError: ``max_len`` < 1 or > ``model.max_len`` (the decoder's input holds BOS
            plus ``max_len`` tokens when EOS is scored), or ``min_len`` outside
            ``0 … max_len``.
    """
    if not 1 <= max_len <= model.max_len:
        raise ValueError(f"max_len must be in 1…{model.max_len} (the model's), got {max_len}")
    if not 0 <= min_len <= max_len:
        raise ValueError(f"min_len must be in 0…max_len ({max_len}), got {min_len}")


def score_dtype(encoded: EncodedSource) -> torch.dtype:
    """The dtype decoding keeps log-probabilities and beam scores in: the model's when it
    is float64 (its exact tests), else float32 (bf16 / fp16 sums would lose the ranking)."""
    return torch.promote_types(encoded.memory.dtype, torch.float32)


def check_interval(device: torch.device) -> int:
    """Steps between two looks at which rows (or beam search's examples) have ended.

    Each look reads a flag back from the device. On the CPU that is a plain memory read,
    so the loop looks every step and never runs an ended row; on an accelerator it waits
    for every queued kernel, so the loop looks every 8 steps and lets ended rows run
    (masked) in between.
    """
    return 1 if device.type == "cpu" else 8


def banned_ids(
    model: EncoderDecoder, encoded: EncodedSource, vocab_size: int, num_extended: int = 0
) -> Tensor:
    """``(B, V)`` True at ids that must never be emitted for each example.

    PAD and BOS are never outputs (the collator puts neither in ``target_out``); UNK stays
    allowed in vocab and copy mode, where it is a real prediction. Pointer mode bans the
    specials but EOS and the padded source positions (the model already gives those
    −inf; banning them again keeps decoders right should that change). Copy mode bans the
    extension ids that the example's own source does not use: the batch's extension is
    sized for its longest list of out-of-vocabulary words.
    """
    batch, device = encoded.memory.shape[0], encoded.memory.device
    banned = torch.zeros(batch, vocab_size, dtype=torch.bool, device=device)
    banned[:, [PAD_ID, BOS_ID]] = True
    if model.output == "pointer":
        banned[:, :NUM_SPECIALS] = True
        banned[:, EOS_ID] = False
        banned[:, NUM_SPECIALS:] = encoded.padding
    elif model.output == "copy" and num_extended > 0:
        assert encoded.copy_ids is not None
        used = torch.zeros_like(banned).scatter_(1, encoded.copy_ids, True)
        banned[:, model.target_vocab_size :] = ~used[:, model.target_vocab_size :]
    return banned


def banned_columns(banned: Tensor) -> Tensor | None:
    """``(n,)`` the ids ``banned`` ``(R, V)`` bans in every row, when every row bans the
    same ones (the vocabulary output: PAD and BOS), else ``None``.

    :func:`constrain` fills n columns for them instead of reading an ``(R, V)`` mask: a
    pass over the step's scores fewer (one look per decode, not per step).
    """
    if banned.shape[0] == 0 or not bool((banned == banned[:1]).all()):
        return None
    return banned[0].nonzero().squeeze(1)


def constrain(
    log_probs: Tensor,
    banned: Tensor,
    *,
    step: int,
    min_len: int,
    max_len: int,
    scores: Tensor | None = None,
) -> Tensor:
    """The log-probabilities a decoder may choose from at ``step`` (0-based), −inf elsewhere.

    Args:
        log_probs: ``(R, V)`` the model's next-token log-probabilities.
        banned: ``(R, V)`` ids never allowed (:func:`banned_ids`, n-gram blocking), or
            ``(n,)`` long: ids banned in every row (:func:`banned_columns`).
        step: tokens emitted so far.
        min_len: EOS is banned while fewer tokens were emitted.
        max_len: at ``step == max_len`` only EOS is allowed (the sequence is cut).
        scores: ``(R,)`` added to every allowed entry (beam search's hypothesis scores:
            the result is then every extension's score), in the same pass.

    A row left with no finite entry (e.g. ``min_len`` asks for more tokens than a short
    pointer source with n-gram blocking can give) gets EOS back, so no row turns into NaN.
    """
    eos_value = log_probs[:, EOS_ID] if scores is None else scores + log_probs[:, EOS_ID]
    if step >= max_len:
        out = torch.full_like(log_probs, NEG_INF)
        out[:, EOS_ID] = eos_value
        return out
    if banned.dtype == torch.bool:
        out = log_probs.masked_fill(banned, NEG_INF)
        if scores is not None:
            out.add_(scores.unsqueeze(1))
    else:
        out = log_probs.clone() if scores is None else log_probs + scores.unsqueeze(1)
        out.index_fill_(1, banned, NEG_INF)
    if step < min_len:
        out[:, EOS_ID] = NEG_INF
    stuck = out.amax(dim=-1) == NEG_INF  # a where, not an if: no device sync
    eos = out[:, EOS_ID]
    eos.copy_(torch.where(stuck, eos_value, eos))
    return out
