"""Beam search (lecture 001 §5.3; lecture 003 §Beam Search).

Greedy decoding commits to the best token at every step, and a locally worse choice can
lead to a better sequence. Beam search keeps the K best partial hypotheses instead: each
step extends all of them by every token, ranks the K·V extensions by their summed
log-probability, and keeps the K best. The lecture's caveat holds: the highest-scoring
path helps tasks with one right answer (speech recognition, the toy tasks) and can hurt
ones that want creativity (use :func:`~selfattn.decoding.sample` there).

Layout: B examples × K beams are B·K rows of one decoder batch, so each step is one
decoder call; re-ranking moves rows, and :meth:`IncrementalDecoder.select` moves their
key/value cache rows with them (``DecoderCache.reorder``). Bookkeeping follows fairseq:

* each step takes the 2K best extensions per example, so K of them remain after the
  (at most K, one per beam) EOS extensions are set aside;
* an EOS extension ranked among the first K finishes a hypothesis, scored by its summed
  log-probability divided by the length penalty; the K best finished ones are kept;
* an example is done once it has finished K hypotheses (or has no live beam left); it
  finishes nothing more and is dropped from the batch at the loop's next look at which
  examples are done (every step on the CPU, every 8 steps on an accelerator, where a look
  waits for the device: :func:`~selfattn.decoding.common.check_interval`). At ``max_len``
  tokens EOS is forced, so every example finishes. With K = 1 this is exactly greedy
  decoding.

Length penalty (GNMT, Wu et al. 2016): lp(Y) = ((5 + |Y|) / 6)^α, |Y| counting EOS.
α = 0 ranks by the plain sum, which favours short outputs; α = 1 is close to the
per-token average.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from selfattn.attention.cache import RowMoves
from selfattn.decoding.common import (
    NEG_INF,
    DecodeResult,
    Hypothesis,
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


def length_penalty_factor(length: int, alpha: float) -> float:
    """GNMT's lp = ((5 + length) / 6)^α; ``length`` counts EOS. 1 for α = 0."""
    return ((5.0 + length) / 6.0) ** alpha


def repeated_ngrams(tokens: Tensor, n: int, vocab_size: int) -> Tensor:
    """``(R, V)`` True at the ids that would complete an n-gram already in the row.

    Args:
        tokens: ``(R, t)`` each row's ids so far.
        n: n-gram size ≥ 1 (1 bans every id already emitted).
        vocab_size: V.
    """
    rows, length = tokens.shape
    banned = torch.zeros(rows, vocab_size, dtype=torch.bool, device=tokens.device)
    if length < n:
        return banned
    windows = tokens.unfold(1, n, 1)  # (R, W, n): every n-gram, W = t - n + 1
    last = tokens[:, length - (n - 1) :]  # (R, n - 1): what the next id would extend
    match = (windows[:, :, :-1] == last.unsqueeze(1)).all(dim=-1)  # (R, W)
    # scatter_add, not scatter: one id can close several n-grams, matching or not.
    counts = torch.zeros(rows, vocab_size, device=tokens.device)
    counts.scatter_add_(1, windows[:, :, -1], match.float())
    return counts > 0


class _Finished:
    """The K best finished hypotheses of each of B examples, merged step by step."""

    def __init__(
        self, batch: int, beam_size: int, max_len: int, device: torch.device, dtype: torch.dtype
    ) -> None:
        shape = (batch, beam_size)
        self.score = torch.full(shape, NEG_INF, dtype=dtype, device=device)
        self.log_prob = torch.full(shape, NEG_INF, dtype=dtype, device=device)
        self.length = torch.zeros(shape, dtype=torch.long, device=device)
        self.natural = torch.zeros(shape, dtype=torch.bool, device=device)
        self.ids = torch.full((*shape, max_len + 1), PAD_ID, dtype=torch.long, device=device)
        self.steps = torch.zeros(*shape, max_len + 1, dtype=dtype, device=device)
        self.count = torch.zeros(batch, dtype=torch.long, device=device)
        self.width = max_len + 1

    def add(
        self,
        examples: Tensor,
        score: Tensor,
        log_prob: Tensor,
        ids: Tensor,
        steps: Tensor,
        natural: bool,
    ) -> None:
        """Merge new hypotheses of ``examples`` ``(L,)``: scores ``(L, K)`` (−inf: none),
        ``ids`` ``(L, K, t)`` without EOS and ``steps`` ``(L, K, t + 1)`` with it."""
        length = ids.shape[-1]
        self.count[examples] += torch.isfinite(score).sum(dim=1)
        new_length = torch.full_like(self.length[examples], length)
        new_natural = torch.full_like(self.natural[examples], natural)
        merged = {
            "score": torch.cat([self.score[examples], score], dim=1),
            "log_prob": torch.cat([self.log_prob[examples], log_prob], dim=1),
            "length": torch.cat([self.length[examples], new_length], dim=1),
            "natural": torch.cat([self.natural[examples], new_natural], dim=1),
        }
        keep = merged["score"].topk(self.score.shape[1], dim=1).indices  # (L, K), best first
        for name, values in merged.items():
            getattr(self, name)[examples] = values.gather(1, keep)
        pad = self.width - length
        new_ids = torch.cat([self.ids[examples], F.pad(ids, (0, pad), value=PAD_ID)], dim=1)
        new_steps = torch.cat([self.steps[examples], F.pad(steps, (0, pad - 1))], dim=1)
        wide = keep.unsqueeze(-1).expand(-1, -1, self.width)
        self.ids[examples] = new_ids.gather(1, wide)
        self.steps[examples] = new_steps.gather(1, wide)


def check_beam(beam_size: int, no_repeat_ngram_size: int) -> None:
    """Refuse a beam size < 1 or a negative n-gram size in one line."""
    if beam_size < 1:
        raise ValueError(f"beam_size must be at least 1, got {beam_size}")
    if no_repeat_ngram_size < 0:
        raise ValueError(f"no_repeat_ngram_size must be ≥ 0, got {no_repeat_ngram_size}")


@torch.no_grad()
def beam_search(
    model: EncoderDecoder,
    encoded: EncodedSource,
    *,
    beam_size: int,
    max_len: int,
    length_penalty: float = 1.0,
    no_repeat_ngram_size: int = 0,
    min_len: int = 0,
    num_extended: int = 0,
    use_cache: bool = True,
    nbest: bool = False,
) -> DecodeResult:
    """The best hypothesis of a K-beam search for every example of the batch.

    Args:
        model: the encoder–decoder, in eval mode.
        encoded: ``(B, S, E)`` from ``model.encode``.
        beam_size: K ≥ 1; 1 gives greedy decoding's tokens.
        max_len: most tokens per hypothesis (EOS not counted), at most ``model.max_len``.
        length_penalty: α of GNMT's ((5 + |Y|) / 6)^α (module docstring); 0: plain sum.
        no_repeat_ngram_size: n > 0 forbids any n-gram to occur twice in a hypothesis.
        min_len: EOS is banned before this many tokens.
        num_extended: copy mode: the batch's out-of-vocabulary extension.
        use_cache: incremental decoding with a KV cache (False: recompute the prefix).
        nbest: also return every example's finished hypotheses, best first.

    Returns:
        A :class:`DecodeResult`: ``score`` is the normalised score, ``log_prob`` the sum.

    Raises:
        ValueError: ``beam_size`` < 1, ``no_repeat_ngram_size`` < 0, or a bad
            ``max_len`` / ``min_len``.
    """
    check_beam(beam_size, no_repeat_ngram_size)
    check_max_len(model, max_len, min_len)
    batch, device, k = encoded.memory.shape[0], encoded.memory.device, beam_size
    state = IncrementalDecoder(
        model,
        encoded.index_select(torch.arange(batch, device=device).repeat_interleave(k)),
        max_len=max_len,
        num_extended=num_extended,
        use_cache=use_cache,
        group=k,
    )
    dtype = score_dtype(encoded)
    finished = _Finished(batch, k, max_len, device, dtype)
    live = torch.arange(batch, device=device)  # examples still searching
    first_row = live * k  # (L,) each live example's first decoder row
    # All K beams start as the same BOS row: only the first may extend, or the top K
    # would be K copies of one hypothesis.
    beam_log_prob = torch.full((batch, k), NEG_INF, dtype=dtype, device=device)
    beam_log_prob[:, 0] = 0.0
    beam_steps = torch.zeros(batch * k, max_len + 1, dtype=dtype, device=device)  # token log-probs
    banned_base: Tensor | None = None
    banned = torch.empty(0)
    columns: Tensor | None = None  # the ids every row bans, when that is all it bans
    done = torch.zeros(batch, dtype=torch.bool, device=device)  # per live example
    interval = check_interval(device)
    for step in range(max_len + 1):
        log_probs = state.log_probs()  # (L·K, V)
        vocab = log_probs.shape[-1]
        if banned_base is None:
            banned_base = banned_ids(model, encoded, vocab, num_extended)
            banned = banned_base.repeat_interleave(k, dim=0)
            columns = banned_columns(banned_base)
        step_banned = banned if columns is None else columns
        if no_repeat_ngram_size:
            step_banned = banned | repeated_ngrams(state.tokens, no_repeat_ngram_size, vocab)
        num_live = live.numel()
        candidates = constrain(
            log_probs,
            step_banned,
            step=step,
            min_len=min_len,
            max_len=max_len,
            scores=beam_log_prob.view(-1),
        ).view(num_live, k * vocab)
        top_score, top_index = candidates.topk(min(2 * k, k * vocab), dim=1)  # best first
        token = top_index % vocab
        source_row = top_index // vocab + first_row.unsqueeze(1)
        is_eos = token == EOS_ID

        # An example that is done (and not dropped yet) finishes nothing more.
        # Reading the flags is free on the CPU and skips most merges (and, with no EOS
        # among the K best, the finishing hypotheses' flags); on an accelerator merging
        # nothing costs less than waiting for the flag.
        ends = None
        if interval > 1 or bool(is_eos[:, :k].any()):
            ends = is_eos[:, :k] & (top_score[:, :k] > NEG_INF) & ~done.unsqueeze(1)
            if interval == 1 and not bool(ends.any()):
                ends = None
        if ends is not None:
            rows = source_row[:, :k]  # (L, K)
            eos_log_prob = log_probs[rows.reshape(-1), EOS_ID].view(num_live, k, 1)
            log_prob = top_score[:, :k].masked_fill(~ends, NEG_INF)
            finished.add(
                live,
                score=log_prob / length_penalty_factor(step + 1, length_penalty),
                log_prob=log_prob,
                ids=state.tokens[rows],
                steps=torch.cat([beam_steps[rows, :step], eos_log_prob], dim=-1),
                natural=step < max_len,
            )

        next_score, pick = top_score.masked_fill(is_eos, NEG_INF).topk(k, dim=1)  # (L, K)
        next_row, next_token = source_row.gather(1, pick), token.gather(1, pick)
        stuck = next_score[:, 0] == NEG_INF  # no live hypothesis left (best first)
        # The finished counts change only when hypotheses were merged.
        done |= stuck if ends is None else (finished.count[live] >= k) | stuck
        if step == max_len:
            break
        num_done = int(done.sum()) if (step + 1) % interval == 0 else 0
        if num_done == num_live:
            break
        if num_done:  # drop the examples that are done, with their rows
            keep = (~done).nonzero().squeeze(1)
            live, next_score, done = live[keep], next_score[keep], done[keep]
            next_row, next_token = next_row[keep], next_token[keep]
            first_row = torch.arange(live.numel(), device=device) * k
            assert banned_base is not None
            banned = banned_base[live].repeat_interleave(k, dim=0)
        beam_log_prob = next_score
        rows, tokens = next_row.view(-1), next_token.view(-1)
        moved = None
        if interval == 1 and not num_done:  # the CPU: rows found without a device wait
            order, moved = _in_parent_rows(next_row.tolist(), k)
            rows, tokens = rows[order], tokens[order]
            beam_log_prob = next_score.view(-1)[order].view(num_live, k)
            moved.apply(beam_steps)
        else:
            beam_steps = beam_steps.index_select(0, rows)
        beam_steps[:, step] = log_probs[rows, tokens]
        state.select(rows, same_sources=not num_done, moved=moved)
        state.append(tokens)
    return _result(finished, nbest)


def _in_parent_rows(parents: list[list[int]], k: int) -> tuple[Tensor, RowMoves]:
    """Where the next step's hypotheses go: each example's K decoder rows in any order
    (every row is searched alike), so the first child of each parent stays in the
    parent's row and only the others are copied, into the rows of parents that left
    none. ``parents``: per example its K hypotheses' rows (example e's are e·K … e·K + K −
    1). Returns the hypothesis (flat index into ``parents``) each row takes and the rows
    that change, none of which is read by another (:meth:`RowMoves.apply`).

    Best-first rows would move every row whose rank changed (15 % of rows a step in
    ``benchmarks/kv_cache.py``'s batch-8 beam search, 9 % this way), each through a copy.
    """
    order: list[int] = []
    rows: list[int] = []
    sources: list[int] = []
    for example, row in enumerate(parents):
        first = example * k
        slot = [-1] * k  # each hypothesis's row, counted from ``first``
        taken = [False] * k
        for j, parent in enumerate(row):
            if not taken[parent - first]:
                taken[parent - first] = True
                slot[j] = parent - first
        free = iter([s for s in range(k) if not taken[s]])
        placed = [0] * k  # the hypothesis each row takes
        for j, parent in enumerate(row):
            if slot[j] < 0:
                slot[j] = next(free)
                rows.append(first + slot[j])
                sources.append(parent)
            placed[slot[j]] = first + j
        order.extend(placed)
    moves = RowMoves(torch.tensor(rows), torch.tensor(sources), bool(rows))
    return torch.tensor(order), moves


def _result(finished: _Finished, nbest: bool) -> DecodeResult:
    """The best finished hypothesis of every example (and all of them with ``nbest``)."""
    length = finished.length[:, 0]
    width = int(length.max()) + 1 if length.numel() else 0
    return DecodeResult(
        tokens=rows_to_lists(finished.ids[:, 0], length),
        log_prob=finished.log_prob[:, 0],
        score=finished.score[:, 0],
        step_log_probs=finished.steps[:, 0, :width],
        finished=finished.natural[:, 0],
        nbest=_nbest(finished) if nbest else None,
    )


def _nbest(finished: _Finished) -> list[list[Hypothesis]]:
    """Every example's finished hypotheses, best first."""
    ids, lengths = finished.ids.tolist(), finished.length.tolist()
    log_probs, scores = finished.log_prob.tolist(), finished.score.tolist()
    return [
        [
            Hypothesis(ids[b][i][: lengths[b][i]], log_probs[b][i], scores[b][i])
            for i in range(len(scores[b]))
            if scores[b][i] != NEG_INF
        ]
        for b in range(len(scores))
    ]
