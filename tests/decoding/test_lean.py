"""The lean decoding step (selfattn.decoding.lean) computes what ``model.decode`` computes,
bit for bit, for every decoder it takes; refuses the ones it does not; and beam search's
per-example cross-attention (``DecoderCache.group``) finds the same hypotheses."""

from __future__ import annotations

import importlib
import itertools
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest
import torch
from torch import Tensor

from selfattn.decoding import IncrementalDecoder, autoregressive, beam_search, greedy
from selfattn.decoding.common import banned_columns, constrain
from selfattn.decoding.lean import lean_step
from selfattn.models import StackConfig
from selfattn.models.seq2seq import EOS_ID, NUM_SPECIALS, Seq2SeqTransformer, decoder_like

from .conftest import VOCAB, encoded_batch, tiny_model

incremental = importlib.import_module("selfattn.decoding.incremental")


def _model(norm_first: bool = True, **changes: Any) -> Seq2SeqTransformer:
    """A tiny random vocabulary model (E=32, H=4, 2+2 layers) with ``changes`` to its stack."""
    torch.manual_seed(0)
    stack = StackConfig(
        32, 4, 64, num_layers=2, positional="sinusoidal", max_len=16, norm_first=norm_first
    )
    options = {"cross_layers": changes.pop("cross_layers", "last")}
    stack = replace(stack, **changes)
    return Seq2SeqTransformer(
        stack, decoder_like(stack), target_vocab_size=VOCAB, source_vocab_size=VOCAB, **options
    ).eval()


DECODERS = {
    "pre-LN": {},
    "post-LN": {"norm_first": False},
    "gelu": {"activation": "gelu"},
    "swiglu, no bias": {"activation": "swiglu", "bias": False},
    "grouped-query": {"num_kv_heads": 2},
    "learned positions": {"positional": "learned"},
    "matching cross-layers": {"cross_layers": "matching"},
}


def _ending_early() -> Callable[[Tensor], Tensor]:
    """The argmax, but EOS for the second of the rows left at steps 2, 5 and 8: rows of
    these random models (which repeat one token) end at different steps, from the middle
    of the batch."""
    steps = itertools.count()

    def choose(allowed: Tensor) -> Tensor:
        token = allowed.argmax(dim=-1)
        if next(steps) in (2, 5, 8) and len(token) > 1:
            token[1] = EOS_ID
        return token

    return choose


def _generic(monkeypatch: pytest.MonkeyPatch) -> None:
    """Decode through ``model.decode`` only."""
    monkeypatch.setattr(incremental, "lean_step", lambda model, encoded: None)


@pytest.mark.parametrize("changes", DECODERS.values(), ids=DECODERS.keys())
@pytest.mark.parametrize("batch", [1, 3])
def test_the_lean_step_is_model_decode_bit_for_bit(
    monkeypatch: pytest.MonkeyPatch, changes: dict[str, Any], batch: int
) -> None:
    model = _model(**changes)
    encoded, _ = encoded_batch(model, batch=batch)  # row 0 padded: the cross-attention mask
    assert lean_step(model, encoded) is None  # autograd on: only model.decode records it
    with torch.no_grad():
        assert lean_step(model, encoded) is not None
    lean = greedy(model, encoded, max_len=10, min_len=10)
    _generic(monkeypatch)
    plain = greedy(model, encoded, max_len=10, min_len=10)
    assert lean.tokens == plain.tokens
    assert torch.equal(lean.step_log_probs, plain.step_log_probs)


def test_rows_that_end_early_leave_the_others_as_they_were(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The loop drops ended rows from the lean step's batch (and cache) at once."""
    model = _model()
    encoded, _ = encoded_batch(model, batch=4)
    lean = autoregressive(model, encoded, _ending_early(), max_len=12)
    _generic(monkeypatch)
    plain = autoregressive(model, encoded, _ending_early(), max_len=12)
    assert len(set(lean.lengths)) > 1  # rows did end at different steps
    assert lean.tokens == plain.tokens
    assert torch.equal(lean.step_log_probs, plain.step_log_probs)


@pytest.mark.parametrize(("norm_first", "eos_scale"), [(True, 5.0), (False, 4.0)])
def test_beam_search_attending_per_example_finds_the_same_hypotheses(
    monkeypatch: pytest.MonkeyPatch, norm_first: bool, eos_scale: float
) -> None:
    """Beams of one example read its source's keys and values together, one cache row per
    example, through re-ranking and the dropping of examples that are done."""
    model = _model(norm_first)
    with torch.no_grad():  # EOS likelier (the output is tied): examples end at 1 … 10 tokens
        model.target_embed.weight[EOS_ID] *= eos_scale
    torch.manual_seed(0)
    encoded, _ = encoded_batch(model, batch=4)
    lean = beam_search(model, encoded, beam_size=3, max_len=10, nbest=True)
    _generic(monkeypatch)
    plain = beam_search(model, encoded, beam_size=3, max_len=10, nbest=True)
    assert len(set(lean.lengths)) > 1
    assert lean.tokens == plain.tokens
    assert lean.nbest is not None and plain.nbest is not None
    assert [[h.tokens for h in n] for n in lean.nbest] == [
        [h.tokens for h in n] for n in plain.nbest
    ]
    torch.testing.assert_close(lean.score, plain.score, rtol=0, atol=1e-5)
    torch.testing.assert_close(lean.step_log_probs, plain.step_log_probs, rtol=0, atol=1e-5)


def test_a_group_of_rows_keeps_one_cross_attention_row() -> None:
    model = _model()
    encoded, _ = encoded_batch(model, batch=2)
    beams = encoded.index_select(torch.tensor([0, 0, 0, 1, 1, 1]))
    with torch.no_grad():
        state = IncrementalDecoder(model, beams, max_len=4, group=3)
        state.log_probs()
        state.append(torch.full((6,), NUM_SPECIALS))
        state.select(torch.tensor([2, 0, 0, 4, 5, 3]), same_sources=True)
        state.log_probs()
        state.append(torch.full((6,), NUM_SPECIALS))
        state.select(torch.tensor([3, 4, 5]))  # example 0 is done
        state.log_probs()
    assert state.cache is not None
    own, cross = state.cache.layers[0]
    assert own.key is not None and own.key.shape[0] == 3
    assert cross.key is not None and cross.key.shape[0] == 1
    with pytest.raises(ValueError, match="group must divide the 6 rows, got 4"):
        IncrementalDecoder(model, beams, group=4)


@pytest.mark.parametrize(
    "model",
    [
        tiny_model(positional="rotary"),
        tiny_model(positional="relative"),
        tiny_model("pointer"),
        tiny_model("copy"),
        tiny_model().train(),
    ],
    ids=["rotary", "relative", "pointer", "copy", "training"],
)
def test_decoders_it_does_not_take_go_through_model_decode(model: Seq2SeqTransformer) -> None:
    encoded, _ = encoded_batch(model)
    with torch.no_grad():
        assert lean_step(model, encoded) is None


def test_hooks_and_a_source_of_padding_only_go_through_model_decode() -> None:
    model = tiny_model()
    encoded, _ = encoded_batch(model)
    with torch.no_grad():
        handle = model.decoder.layers[0].register_forward_hook(lambda *_: None)
        assert lean_step(model, encoded) is None  # the hook would not see the block run
        handle.remove()
        assert lean_step(model, encoded) is not None
        encoded.padding[1] = True
        assert lean_step(model, encoded) is None


def test_banning_columns_is_banning_by_mask() -> None:
    log_probs = torch.randn(3, 9).log_softmax(-1)
    banned = torch.zeros(3, 9, dtype=torch.bool)
    banned[:, [0, 2]] = True
    columns = banned_columns(banned)
    assert columns is not None and columns.tolist() == [0, 2]
    scores = torch.tensor([0.0, -1.5, float("-inf")])
    for step, min_len in ((0, 2), (3, 2), (5, 0)):
        limits = {"step": step, "min_len": min_len, "max_len": 5}
        for extra in ({}, {"scores": scores}):
            by_mask = constrain(log_probs, banned, **limits, **extra)  # type: ignore[arg-type]
            by_columns = constrain(log_probs, columns, **limits, **extra)  # type: ignore[arg-type]
            assert torch.equal(by_mask, by_columns)
    with_scores = constrain(log_probs, banned, step=0, min_len=0, max_len=5, scores=scores)
    plain = constrain(log_probs, banned, step=0, min_len=0, max_len=5)
    assert torch.equal(with_scores, scores.unsqueeze(1) + plain)
    banned[1, 5] = True
    assert banned_columns(banned) is None


@pytest.mark.parametrize(
    "changes", [{}, {"num_kv_heads": 2, "bias": False}], ids=["heads", "grouped-query, no bias"]
)
def test_a_short_source_folded_into_the_projections_decodes_the_same(
    monkeypatch: pytest.MonkeyPatch, changes: dict[str, Any]
) -> None:
    """2 · examples · H · S ≤ E (here 2 · 2 · 4 · 2 = 32): the cross-attention's keys and
    values are kept multiplied into its query and output projections."""
    model = _model(**changes)
    encoded, _ = encoded_batch(model, batch=2, length=2)  # row 0: one real token
    with torch.no_grad():
        state = IncrementalDecoder(model, encoded, max_len=2)
        state.log_probs()
    assert state.cache is not None and state.cache.layers[0][1].folded
    runs = [
        (greedy(model, encoded, max_len=8), beam_search(model, encoded, beam_size=3, max_len=8))
    ]
    _generic(monkeypatch)
    runs.append(
        (greedy(model, encoded, max_len=8), beam_search(model, encoded, beam_size=3, max_len=8))
    )
    for lean, plain in zip(*runs, strict=True):
        assert lean.tokens == plain.tokens
        torch.testing.assert_close(lean.step_log_probs, plain.step_log_probs, rtol=0, atol=1e-5)
