"""Decoding an encoder–decoder's output (lecture 001 §3–5): plain functions over the model.

    >>> encoded = model.encode(source, padding)
    >>> greedy(model, encoded, max_len=50).tokens
    >>> beam_search(model, encoded, beam_size=5, max_len=50).tokens
    >>> sample(model, encoded, max_len=50, top_p=0.9, generator=torch.Generator()).tokens
    >>> non_autoregressive(model, encoded, length_scale=0.5).tokens

Every function decodes the whole batch at once and returns a :class:`DecodeResult`.
Autoregressive decoders run from BOS until EOS with a key/value cache
(:class:`IncrementalDecoder`), one decoder call per step; ``use_cache=False`` recomputes
the prefix instead (the reference). PAD and BOS are never emitted; in pointer mode only
EOS and real source positions are.
"""

from __future__ import annotations

from selfattn.decoding.beam import beam_search, length_penalty_factor, repeated_ngrams
from selfattn.decoding.common import DecodeResult, Hypothesis, banned_ids, constrain
from selfattn.decoding.greedy import DecodeLimits, autoregressive, greedy
from selfattn.decoding.incremental import IncrementalDecoder
from selfattn.decoding.nat import nat_lengths, non_autoregressive
from selfattn.decoding.sampling import filter_top_k, filter_top_p, sample

__all__ = [
    "DecodeLimits",
    "DecodeResult",
    "Hypothesis",
    "IncrementalDecoder",
    "autoregressive",
    "banned_ids",
    "beam_search",
    "constrain",
    "filter_top_k",
    "filter_top_p",
    "greedy",
    "length_penalty_factor",
    "nat_lengths",
    "non_autoregressive",
    "repeated_ngrams",
    "sample",
]
