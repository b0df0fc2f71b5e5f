"""Beam search and sampling for Whisper, through selfattn's own decoders.

:func:`~selfattn.decoding.beam_search` and :func:`~selfattn.decoding.sample` decode any
:class:`~selfattn.models.encoder_decoder.EncoderDecoder`: a decoder started from BOS that
ends at EOS, with selfattn's special ids. :class:`WhisperAsEncoderDecoder` makes a
:class:`~selfattn.pretrained.whisper.WhisperModel` one:

* ids are swapped so that selfattn's EOS is Whisper's ``<|endoftext|>``, and selfattn's
  PAD and BOS (which the decoders never emit) are two of Whisper's always-suppressed
  tokens, so the decoders' own bans change nothing;
* the BOS input stands for Whisper's whole task prefix (start of transcript, language,
  transcribe, no timestamps), and the decoding state shifts its offset by the prefix's
  extra positions;
* the log-probabilities are Whisper's, with its suppressed tokens at −inf (its "begin"
  ones too at the first step), as Whisper's own decoding masks them.

Whisper's temperature fallback (:mod:`selfattn.pretrained.fallback`) decodes a window
again by sampling at 0.2, 0.4, … 1.0 (:func:`fallback_searches`), each the best of five
samples, while the transcript loops or is unsure.

>>> search = whisper_search("beam", beam_size=5)
>>> Transcriber("whisper-base", search=search)("recording.wav")
>>> Transcriber("whisper-base", search=search, fallback=fallback_searches())("noisy.wav")
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from selfattn.attention.cache import DecoderCache
from selfattn.decoding.beam import beam_search, check_beam
from selfattn.decoding.common import NEG_INF, DecodeResult
from selfattn.decoding.greedy import greedy
from selfattn.decoding.sampling import check_sampling, sample
from selfattn.models.seq2seq_outputs import EncodedSource, Seq2SeqOutput
from selfattn.pretrained.fallback import fallback_temperatures
from selfattn.pretrained.transcribe import Decoded, SearchFn
from selfattn.pretrained.whisper import WhisperModel
from selfattn.specials import BOS_ID, EOS_ID, PAD_ID

__all__ = ["WhisperAsEncoderDecoder", "WhisperState", "fallback_searches", "whisper_search"]


class WhisperState:
    """A :class:`DecoderCache` whose offset counts the task prefix as one position (BOS).

    Args:
        cache: Whisper's decoder cache.
        extra: the prefix's positions beyond the first.
    """

    def __init__(self, cache: DecoderCache, extra: int) -> None:
        self.cache, self.extra = cache, extra

    @property
    def offset(self) -> int:
        """Decoder inputs consumed so far, the prefix counted as one."""
        return max(0, self.cache.offset - self.extra)

    def reorder(self, index: Tensor, *, memory: bool = True) -> None:
        """Keep rows ``index`` (as :meth:`DecoderCache.reorder`)."""
        self.cache.reorder(index, memory=memory)


def _swaps(model: WhisperModel) -> list[tuple[int, int]]:
    """selfattn's EOS ↔ ``<|endoftext|>``; PAD and BOS ↔ two always-suppressed ids."""
    config = model.config
    taken = {PAD_ID, BOS_ID, EOS_ID, config.eot_id}
    spare = [i for i in config.suppress_tokens if i not in taken and 0 <= i < config.vocab_size]
    if len(spare) < 2:
        raise ValueError(
            "this Whisper checkpoint suppresses fewer than two tokens; beam search and "
            "sampling need two to stand for selfattn's PAD and BOS"
        )
    return [(EOS_ID, config.eot_id), (PAD_ID, spare[0]), (BOS_ID, spare[1])]


class WhisperAsEncoderDecoder:
    """A Whisper model as the :class:`EncoderDecoder` that selfattn's decoders read.

    Args:
        model: the Whisper model, in eval mode.
        prefix: the task prefix's ids (Whisper's).

    Attributes:
        to_whisper: ``(V,)`` Whisper's id of each of selfattn's (a permutation, its own
            inverse).
        no_speech: per row, the probabilities the first step gave at Whisper's start
            position (``(R, V)`` in Whisper's ids), or ``None`` before it.
    """

    output = "vocab"

    def __init__(self, model: WhisperModel, prefix: list[int]) -> None:
        self.model, self.prefix = model, list(prefix)
        config = model.config
        permutation = torch.arange(config.vocab_size)
        for ours, theirs in _swaps(model):
            permutation[ours], permutation[theirs] = theirs, ours
        self.to_whisper = permutation
        suppress = torch.zeros(config.vocab_size, dtype=torch.bool)
        suppress[[i for i in config.suppress_tokens if 0 <= i < config.vocab_size]] = True
        first = suppress.clone()
        first[[i for i in config.begin_suppress_tokens if 0 <= i < config.vocab_size]] = True
        self._suppress, self._first = suppress, first
        self.no_speech: Tensor | None = None

    @property
    def max_len(self) -> int:
        """Most tokens after the prefix (the decoder's positions it leaves)."""
        return self.model.config.max_target_positions - len(self.prefix)

    @property
    def target_vocab_size(self) -> int:
        """V, Whisper's vocabulary."""
        return self.model.config.vocab_size

    def encode(self, features: Tensor) -> EncodedSource:
        """``(B, n_mels, F)`` log-mel frames → the encoded batch (no padding)."""
        memory = self.model.encoder(features)
        padding = torch.zeros(memory.shape[:2], dtype=torch.bool)
        return EncodedSource(memory=memory, padding=padding, memories=None, source_vectors=memory)

    def new_cache(self, capacity: int) -> WhisperState:
        """A decoding state for ``capacity`` inputs, the prefix counted as one."""
        extra = len(self.prefix) - 1
        return WhisperState(DecoderCache(capacity=capacity + extra), extra)

    def decode(
        self,
        target_in: Tensor,
        encoded: EncodedSource,
        *,
        cache: Any = None,
        **_: Any,
    ) -> Seq2SeqOutput:
        """Next-token log-probabilities ``(R, T, V)`` in selfattn's ids.

        Args:
            target_in: ``(R, T)`` selfattn's ids; BOS (at position 0) stands for the prefix.
            encoded: the encoded recordings, one row per decoder row.
            cache: a :class:`WhisperState` (from :meth:`new_cache`), or ``None``.
        """
        offset = 0 if cache is None else cache.offset
        tokens = self.to_whisper[target_in]
        if offset == 0:  # the BOS position: Whisper's task prefix instead
            rows = target_in.shape[0]
            prefix = torch.tensor(self.prefix).expand(rows, -1)
            tokens = torch.cat([prefix, tokens[:, 1:]], dim=1)
        inner = None if cache is None else cache.cache
        log_probs = self.model.decoder(tokens, encoded.memory, cache=inner).log_softmax(-1)
        if offset == 0:
            self.no_speech = log_probs[:, 0].exp()
            log_probs = log_probs[:, len(self.prefix) - 1 :]
        banned = self._suppress.expand(log_probs.shape[1], -1).clone()
        if offset == 0:
            banned[0] = self._first
        log_probs = log_probs.masked_fill(banned, NEG_INF)
        return Seq2SeqOutput(log_probs=log_probs[..., self.to_whisper])

    @torch.no_grad()
    def mean_log_prob(self, ids: list[int], memory: Tensor, *, finished: bool = True) -> float:
        """The mean log-probability of Whisper's ``ids`` and ``<|endoftext|>`` after the
        prefix, each step's distribution renormalised over the tokens it may emit (as
        openai-whisper and transformers measure it for the fallback and the no-speech
        rule; the searches rank by the unrenormalised ones, as transformers' beam does).

        Args:
            ids: the emitted ids (Whisper's), ``<|endoftext|>`` not included.
            memory: ``(1, S, E)`` the recording's encoder states.
            finished: ``<|endoftext|>`` was emitted (False: cut at the decoder's last
                position; its log-probability is then not counted, the divisor stays).
        """
        first = len(self.prefix) - 1  # the position that emits the first token
        logits = self.model.decoder(torch.tensor([self.prefix + ids]), memory)[0, first:]
        banned = self._suppress.expand(logits.shape[0], -1).clone()
        banned[0] = self._first
        log_probs = logits.masked_fill(banned, NEG_INF).log_softmax(-1)
        targets = torch.tensor([*ids, self.model.config.eot_id][: len(ids) + finished])
        chosen = log_probs[: targets.shape[0]].gather(1, targets[:, None])
        return float(chosen.sum()) / (len(ids) + 1)


def _decoded(
    adapter: WhisperAsEncoderDecoder,
    result: DecodeResult,
    encoded: EncodedSource,
    no_speech_id: int | None,
    row: int = 0,
) -> Decoded:
    """Row ``row`` of ``result`` in Whisper's ids, with Whisper's measure of its mean
    log-probability (:meth:`WhisperAsEncoderDecoder.mean_log_prob`)."""
    ids = [int(adapter.to_whisper[i]) for i in result.tokens[row]]
    no_speech = 0.0
    if no_speech_id is not None and adapter.no_speech is not None:
        no_speech = float(adapter.no_speech[row, no_speech_id])
    memory, finished = encoded.memory[row : row + 1], bool(result.finished[row])
    return Decoded(ids, adapter.mean_log_prob(ids, memory, finished=finished), no_speech)


def whisper_search(
    method: str = "greedy",
    *,
    beam_size: int = 5,
    length_penalty: float = 1.0,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    seed: int = 0,
    best_of: int = 1,
) -> SearchFn:
    """A search for :class:`~selfattn.pretrained.transcribe.Transcriber`: selfattn's
    greedy decoding, beam search or sampling over a Whisper model.

    Args:
        method: ``"greedy"``, ``"beam"`` or ``"sample"``.
        beam_size: K of beam search.
        length_penalty: α of beam search's GNMT length penalty (0: the plain sum).
        temperature, top_k, top_p: sampling's reshaping of each step's distribution.
        seed: sampling's generator seed (the same seed, the same transcript).
        best_of: sampling draws this many transcripts (one batch) and keeps the one of
            highest mean log-probability (openai-whisper's ``best_of``; Whisper's measure,
            :meth:`WhisperAsEncoderDecoder.mean_log_prob`).

    Raises:
        ValueError: an unknown method or a bad option (one line).
    """
    if method not in ("greedy", "beam", "sample"):
        raise ValueError(f"Whisper decodes with greedy, beam or sample, not {method!r}")
    if method == "beam":
        check_beam(beam_size, 0)
    if method == "sample":
        check_sampling(temperature, top_k, top_p)
    if isinstance(best_of, bool) or not isinstance(best_of, int) or best_of < 1:
        raise ValueError(f"best_of must be an integer >= 1, got {best_of!r}")
    sampling: dict[str, Any] = {"temperature": temperature, "top_k": top_k, "top_p": top_p}

    @torch.no_grad()
    def search(
        model: WhisperModel, features: Tensor, prefix: list[int], no_speech_id: int | None
    ) -> Decoded:
        adapter = WhisperAsEncoderDecoder(model, prefix)
        encoded = adapter.encode(features.unsqueeze(0))
        decoder: Any = adapter  # an EncoderDecoder by its shape
        max_len = adapter.max_len
        if method == "beam":
            result = beam_search(
                decoder,
                encoded,
                beam_size=beam_size,
                max_len=max_len,
                length_penalty=length_penalty,
            )
        elif method == "sample":
            generator = torch.Generator().manual_seed(seed)
            rows = encoded.index_select(torch.zeros(best_of, dtype=torch.long))
            result = sample(decoder, rows, max_len=max_len, generator=generator, **sampling)
            drawn = [_decoded(adapter, result, rows, no_speech_id, r) for r in range(best_of)]
            return max(drawn, key=lambda decoded: decoded.mean_log_prob)
        else:
            result = greedy(decoder, encoded, max_len=max_len)
        return _decoded(adapter, result, encoded, no_speech_id)

    return search


def fallback_searches(
    step: float = 0.2, *, best_of: int = 5, seed: int = 0
) -> list[tuple[float, SearchFn]]:
    """Whisper's temperature fallback for :class:`~selfattn.pretrained.transcribe.Transcriber`:
    sampling at ``step``, 2·``step``, … 1.0, each keeping the best of ``best_of`` draws
    (openai-whisper: step 0.2, best of 5).

    Raises:
        ValueError: ``step`` outside (0, 1], ``best_of`` < 1 (one line).
    """
    return [
        (t, whisper_search("sample", temperature=t, seed=seed, best_of=best_of))
        for t in fallback_temperatures(step)
    ]
