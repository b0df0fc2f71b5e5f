"""Sampling: reproducible, the right distribution, and the greedy limits of its knobs."""

from __future__ import annotations

import math

import pytest
import torch

from selfattn.decoding import filter_top_k, filter_top_p, greedy, sample
from selfattn.decoding.common import banned_ids, constrain

OUTPUTS = ("vocab", "pointer", "copy")
INF = math.inf


def _kept(logits: torch.Tensor) -> list[list[int]]:
    return [row.isfinite().nonzero().flatten().tolist() for row in logits]


def test_top_p_keeps_the_smallest_set_reaching_p() -> None:
    probs = torch.tensor([[0.125, 0.5, 0.0625, 0.25, 0.0625]])  # sorted: 1, 3, 0, 2|4
    logits = probs.log()
    assert _kept(filter_top_p(logits, 0.5)) == [[1]]  # 0.5 alone reaches 0.5
    assert _kept(filter_top_p(logits, 0.6)) == [[1, 3]]
    assert _kept(filter_top_p(logits, 0.75)) == [[1, 3]]  # exactly reached: no more
    assert _kept(filter_top_p(logits, 0.8)) == [[0, 1, 3]]
    assert _kept(filter_top_p(logits, 0.1)) == [[1]]  # the most probable always stays
    assert _kept(filter_top_p(logits, 1.0)) == [[0, 1, 2, 3, 4]]
    # Kept logits are untouched (sampling renormalises); logits need not be normalised.
    assert torch.equal(filter_top_p(logits + 3.0, 0.6)[0, [1, 3]], logits[0, [1, 3]] + 3.0)


def test_filters_survive_minus_infinity() -> None:
    logits = torch.tensor([[-INF, -1.0, -INF, -2.0], [-INF, -INF, 0.0, -INF]])
    assert _kept(filter_top_p(logits, 0.99)) == [[1, 3], [2]]
    assert _kept(filter_top_k(logits, 3)) == [[1, 3], [2]]
    assert _kept(filter_top_k(logits, 1)) == [[1], [2]]
    assert not filter_top_p(logits, 0.5).isnan().any()


def test_top_k_keeps_the_k_largest() -> None:
    logits = torch.tensor([[0.1, 0.4, 0.3, 0.2]])
    assert _kept(filter_top_k(logits, 2)) == [[1, 2]]
    assert _kept(filter_top_k(logits, 10)) == [[0, 1, 2, 3]]


@pytest.mark.parametrize("output", OUTPUTS)
def test_a_seeded_generator_reproduces_the_draws(make_model, make_batch, output: str) -> None:
    model = make_model(output)
    encoded, num_extended = make_batch(model, batch=6)

    def draw(seed: int):
        generator = torch.Generator().manual_seed(seed)
        return sample(
            model,
            encoded,
            max_len=10,
            temperature=2.0,
            generator=generator,
            num_extended=num_extended,
        )

    first, again, other = draw(1), draw(1), draw(2)
    assert first.tokens == again.tokens
    assert torch.equal(first.log_prob, again.log_prob)
    assert first.tokens != other.tokens


@pytest.mark.parametrize("output", OUTPUTS)
def test_top_k_one_and_a_tiny_temperature_are_greedy(make_model, make_batch, output) -> None:
    model = make_model(output, "rotary")
    encoded, num_extended = make_batch(model, batch=5)
    reference = greedy(model, encoded, max_len=10, num_extended=num_extended)
    for options in ({"top_k": 1, "temperature": 3.0}, {"temperature": 1e-4}, {"top_p": 1e-6}):
        generator = torch.Generator().manual_seed(0)
        drawn = sample(
            model, encoded, max_len=10, generator=generator, num_extended=num_extended, **options
        )
        assert drawn.tokens == reference.tokens, options
        # The reported log-probs are the model's own, not the tempered ones.
        torch.testing.assert_close(drawn.log_prob, reference.log_prob, atol=1e-5, rtol=0)


@pytest.mark.parametrize("temperature", [1.0, 2.0, 0.5])
def test_first_tokens_follow_the_tempered_distribution(make_model, temperature) -> None:
    """20 000 draws of the first token against softmax(log p / τ), over allowed ids."""
    model = make_model("pointer")
    source = torch.randint(4, 12, (1, 5))
    with torch.no_grad():
        encoded = model.encode(source, torch.zeros(1, 5, dtype=torch.bool))
    many = encoded.index_select(torch.zeros(20_000, dtype=torch.long))
    generator = torch.Generator().manual_seed(0)
    drawn = sample(model, many, max_len=1, temperature=temperature, generator=generator)
    first = torch.tensor([row[0] if row else 3 for row in drawn.tokens])
    with torch.no_grad():
        log_probs = model.decode(torch.full((1, 1), 2), encoded).log_probs[0, 0]
    expected = (log_probs / temperature).softmax(-1)
    observed = torch.bincount(first, minlength=expected.numel()).float() / first.numel()
    torch.testing.assert_close(observed, expected, atol=0.015, rtol=0)


@pytest.mark.parametrize("output", OUTPUTS)
def test_no_decoder_emits_a_banned_id(make_model, make_batch, output: str) -> None:
    """Hot sampling reaches every allowed id; none may be PAD, BOS, a pointer special or
    padded position, or an extension id the example's source lacks."""
    model = make_model(output)
    encoded, num_extended = make_batch(model, batch=3)
    rows = encoded.index_select(torch.arange(3).repeat(50))
    generator = torch.Generator().manual_seed(0)
    drawn = sample(
        model, rows, max_len=12, temperature=20.0, generator=generator, num_extended=num_extended
    )
    with torch.no_grad():
        logits = model.decode(torch.full((3, 1), 2), encoded, num_extended=num_extended).log_probs
    banned = banned_ids(model, encoded, logits.shape[-1], num_extended)
    seen = set()
    for index, tokens in enumerate(drawn.tokens):
        allowed = (~banned[index % 3]).nonzero().flatten().tolist()
        assert set(tokens) <= set(allowed), (index % 3, tokens)
        seen.update(tokens)
    if output == "copy":
        assert {12, 13} <= seen  # the last row's own OOV words are copied


def test_constrain_forces_eos_at_max_len_and_bans_it_before_min_len() -> None:
    log_probs = torch.log_softmax(torch.randn(2, 6), dim=-1)
    banned = torch.zeros(2, 6, dtype=torch.bool)
    banned[1] = True  # nothing allowed: EOS comes back rather than a NaN row
    early = constrain(log_probs, banned, step=0, min_len=2, max_len=5)
    assert early[0, 3] == -INF and early[0].isfinite().sum() == 5
    assert early[1].isfinite().nonzero().flatten().tolist() == [3]
    last = constrain(log_probs, torch.zeros_like(banned), step=5, min_len=0, max_len=5)
    assert last.isfinite().nonzero()[:, 1].tolist() == [3, 3]
    assert torch.equal(last[:, 3], log_probs[:, 3])
