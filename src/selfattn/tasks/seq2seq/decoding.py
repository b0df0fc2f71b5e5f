"""The decoding side of the ``seq2seq`` task type: the options its predictions, scores and
attention maps take (the method, the beam, sampling's temperature …) and the loop that
decodes a list of sources batch by batch (:func:`decode_examples`), each batch by
:func:`~selfattn.tasks.seq2seq.search.search` on the device of the model's weights."""

from __future__ import annotations

import dataclasses
import time
from typing import Any

import torch

from selfattn.data import Example
from selfattn.data.batching.collate import batches
from selfattn.data.batching.seq2seq_collate import Seq2SeqCollator
from selfattn.models.seq2seq_builder import Seq2SeqModel
from selfattn.models.seq2seq_options import Seq2SeqConfig
from selfattn.tasks.seq2seq.objective import encode_batch
from selfattn.tasks.seq2seq.scoring import Decoded
from selfattn.tasks.seq2seq.search import Method, search
from selfattn.tasks.task import EVAL_BATCH_SIZE, on_model_device

METHODS = ("greedy", "beam", "sample", "nat")
#: The keyword options of a seq2seq task's ``predict``, ``score`` and ``attention``
#: (:func:`decode_examples`'s).
OPTIONS = frozenset(
    {
        "method",
        "beam_size",
        "temperature",
        "top_k",
        "top_p",
        "length_scale",
        "length_penalty",
        "seed",
        "use_cache",
        "batch_size",
    }
)


def decoding_method(options: dict[str, Any], default: Method) -> Method:
    """The decoding method of ``options`` (``default``: the config's ``seq2seq.decoding``).

    Raises:
        ValueError: not one of :data:`METHODS`.
    """
    method = options.get("method") or default
    if method not in METHODS:
        raise ValueError(f"unknown decoding {method!r}; choose greedy, beam, sample, nat")
    return method


@torch.no_grad()
def decode_examples(
    model: Seq2SeqModel,
    collator: Seq2SeqCollator,
    examples: list[Example],
    method: Method,
    settings: Seq2SeqConfig,
    *,
    max_len: int,
    beam_size: int | None = None,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    length_scale: float = 1.0,
    length_penalty: float | None = None,
    seed: int = 0,
    batch_size: int = EVAL_BATCH_SIZE,
    use_cache: bool = True,
) -> Decoded:
    """Decode ``examples`` (their targets are ignored) with ``method`` and the
    ``[seq2seq]`` ``settings``; no output is longer than ``max_len`` (the model's).

    ``length_penalty`` replaces ``settings.length_penalty`` for beam search;
    ``use_cache=False`` recomputes the whole prefix at every greedy or beam step (the
    reference the KV cache is checked and timed against).

    Raises:
        ValueError: ``nat`` for a model that reads its outputs left to right; a length
            penalty for another method than beam search.
    """
    if method == "nat" and not model.non_autoregressive:
        raise ValueError(
            "nat decoding: the RNN encoder–decoder reads its outputs left to right; "
            "decode it with greedy, beam or sample"
        )
    if length_penalty is not None:
        if method != "beam":
            raise ValueError(f"--length-penalty applies to beam search, not {method} decoding")
        settings = dataclasses.replace(settings, length_penalty=length_penalty)
    generator = torch.Generator().manual_seed(seed)
    tokens: list[list[str]] = []
    scores: list[float] = []
    started = time.perf_counter()
    for group in batches(examples, batch_size, shuffle=False):
        batch = on_model_device(collator(group), model)
        encoded = encode_batch(model, batch)
        longest = int((~batch.source_padding).sum(1).max())
        result = search(
            model,
            encoded,
            method,
            settings,
            max_len=min(int(settings.max_output_ratio * longest) + 10, max_len),
            num_extended=batch.num_extended,
            beam_size=beam_size,
            temperature=temperature,
            top_k=top_k,
            top_p=top_p,
            generator=generator,
            length_scale=length_scale,
            use_cache=use_cache,
        )
        for row, ids in enumerate(result.tokens):
            words = batch.extended[row] if batch.extended else []
            tokens.append(collator.decode_target(ids, words))
        scores.extend(float(s) for s in result.score.tolist())
    return Decoded(tokens, time.perf_counter() - started, scores)
