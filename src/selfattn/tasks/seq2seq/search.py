"""One batch of sources decoded by the method a seq2seq task is asked for: greedy, beam
search, sampling or non-autoregressive (:mod:`selfattn.decoding`), with the
``[seq2seq]`` section's settings."""

from __future__ import annotations

from typing import Literal

import torch

from selfattn.decoding import DecodeResult, beam_search, greedy, non_autoregressive, sample
from selfattn.models.seq2seq_builder import Seq2SeqModel
from selfattn.models.seq2seq_options import Seq2SeqConfig
from selfattn.models.seq2seq_outputs import EncodedSource

Method = Literal["greedy", "beam", "sample", "nat"]


def search(
    model: Seq2SeqModel,
    encoded: EncodedSource,
    method: Method,
    settings: Seq2SeqConfig,
    *,
    max_len: int,
    num_extended: int,
    beam_size: int | None,
    temperature: float,
    top_k: int | None,
    top_p: float | None,
    generator: torch.Generator,
    length_scale: float,
    use_cache: bool,
) -> DecodeResult:
    """The outputs of ``method`` for an encoded batch.

    Args:
        model: the encoder–decoder.
        encoded: its encoded sources.
        method: ``greedy``, ``beam``, ``sample`` or ``nat``.
        settings: beam width (unless ``beam_size``), length penalty and n-gram blocking.
        max_len: the most tokens an output may have.
        num_extended: ids past the vocabulary (copied source words).
        beam_size: the beam's width, ``None`` for ``settings.beam_size``.
        temperature: sampling: the softmax temperature.
        top_k: sampling: keep the k likeliest tokens.
        top_p: sampling: keep the smallest set of mass p.
        generator: sampling's random numbers.
        length_scale: ``nat``: scales the predicted lengths.
        use_cache: greedy and beam search reuse keys and values (else recompute them).
    """
    if method == "greedy":
        return greedy(
            model, encoded, max_len=max_len, num_extended=num_extended, use_cache=use_cache
        )
    if method == "beam":
        return beam_search(
            model,
            encoded,
            beam_size=beam_size or settings.beam_size,
            max_len=max_len,
            length_penalty=settings.length_penalty,
            no_repeat_ngram_size=settings.no_repeat_ngram,
            num_extended=num_extended,
            use_cache=use_cache,
        )
    if method == "sample":
        return sample(
            model,
            encoded,
            max_len=max_len,
            temperature=temperature,
            top_k=top_k,
            top_p=top_p,
            generator=generator,
            num_extended=num_extended,
        )
    return non_autoregressive(model, encoded, length_scale=length_scale, num_extended=num_extended)
