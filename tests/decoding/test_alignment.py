"""Location-aware and forward cross-attention in both encoder–decoders: teacher forcing and
step-by-step decoding run the same recurrence (float64), the cache follows the beams, and
zeroed location filters leave content attention."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from selfattn.attention.alignment import AlignmentConfig
from selfattn.decoding import beam_search, greedy
from selfattn.models import StackConfig
from selfattn.models.encoder_decoder import EncoderDecoder
from selfattn.models.rnn_seq2seq import RNNSeq2Seq
from selfattn.models.seq2seq import NUM_SPECIALS, Seq2SeqTransformer, decoder_like

from .helpers import assert_cache_changes_nothing, step_by_step

VOCAB = 12
FAMILIES = ("transformer", "rnn", "rnn-no-feeding")
KINDS = {
    "content": AlignmentConfig("content"),
    "location": AlignmentConfig("location", filters=3, width=5),
    "forward": AlignmentConfig("forward", max_advance=2),
}


def _model(family: str, alignment: AlignmentConfig, **options: Any) -> EncoderDecoder:
    torch.manual_seed(0)
    if family == "transformer":
        stack = StackConfig(32, 4, 64, num_layers=2, max_len=16, norm_first=True, **options)
        model: EncoderDecoder = Seq2SeqTransformer(
            stack,
            decoder_like(stack),
            target_vocab_size=VOCAB,
            source_vocab_size=VOCAB,
            alignment=alignment,
        )
    else:
        model = RNNSeq2Seq(
            target_vocab_size=VOCAB,
            source_vocab_size=VOCAB,
            embed_dim=16,
            hidden_dim=24,
            max_len=16,
            input_feeding=family == "rnn",
            alignment=alignment,
        )
    return model.double().eval()  # type: ignore[return-value]


def _sources() -> tuple[torch.Tensor, torch.Tensor]:
    source = torch.randint(NUM_SPECIALS, VOCAB, (3, 7))
    padding = torch.zeros(3, 7, dtype=torch.bool)
    padding[0, 4:] = True
    return source.masked_fill(padding, 0), padding


@pytest.mark.parametrize("kind", ["location", "forward"])
@pytest.mark.parametrize("family", FAMILIES)
def test_teacher_forcing_equals_step_by_step_decoding(family: str, kind: str) -> None:
    model = _model(family, KINDS[kind])
    source, padding = _sources()
    prefix = torch.randint(NUM_SPECIALS, VOCAB, (3, 6))
    with torch.no_grad():
        encoded = model.encode(source, padding)
        steps, target_in = step_by_step(model, encoded, prefix)
        forced = model.decode(target_in, encoded, need_weights=True)
    torch.testing.assert_close(steps, forced.log_probs, rtol=0, atol=1e-12)
    # … and the alignment is really recurrent: forward's row t stays within (t + 1)·m.
    assert forced.cross_attentions is not None
    if kind == "forward":
        for weights in forced.cross_attentions:  # (B, H, T, S) per layer
            reach = (torch.arange(6)[:, None] + 1) * 2 < torch.arange(7)[None, :]
            assert bool((weights[:, :, reach] == 0).all())


@pytest.mark.parametrize("family", FAMILIES)
def test_zero_location_filters_equal_content_attention(family: str) -> None:
    content = _model(family, KINDS["content"])
    location = _model(family, KINDS["location"])
    location.load_state_dict(content.state_dict(), strict=False)  # the extra: F, U, w
    for name, parameter in location.named_parameters():
        if name.endswith("location.conv.weight"):
            torch.nn.init.zeros_(parameter)
    source, padding = _sources()
    target_in = torch.randint(NUM_SPECIALS, VOCAB, (3, 5))
    with torch.no_grad():
        want = content(source, padding, target_in).log_probs
        got = location(source, padding, target_in).log_probs
    torch.testing.assert_close(got, want, rtol=0, atol=1e-12)


@pytest.mark.parametrize("kind", ["location", "forward"])
@pytest.mark.parametrize("family", ["transformer", "rnn"])
def test_greedy_beam_and_sampling_follow_the_alignment(family: str, kind: str) -> None:
    model = _model(family, KINDS[kind])
    with torch.no_grad():
        encoded = model.encode(*_sources())
        best = greedy(model, encoded, max_len=8)
        one = beam_search(model, encoded, beam_size=1, max_len=8)
        assert one.tokens == best.tokens
        torch.testing.assert_close(one.log_prob, best.log_prob, rtol=0, atol=1e-12)
        # Beams are re-ranked every step: the cached alignment must move with its beam, so
        # the cached search equals the one recomputing every prefix.
        assert_cache_changes_nothing(model, encoded, seed=1, atol=1e-12)


def test_grouped_query_heads_share_nothing_but_keys() -> None:
    """With fewer key/value heads the aligned cross-attention repeats them per query head
    and still decodes step by step as it trains."""
    model = _model("transformer", KINDS["forward"], num_kv_heads=2)
    source, padding = _sources()
    with torch.no_grad():
        encoded = model.encode(source, padding)
        cached = greedy(model, encoded, max_len=6)
        recomputed = greedy(model, encoded, max_len=6, use_cache=False)
    assert cached.tokens == recomputed.tokens
