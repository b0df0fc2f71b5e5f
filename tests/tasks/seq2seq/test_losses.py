"""Seq2seq objectives: NLL from log-probabilities, scheduled sampling, attention penalties,
and the copy mechanism learning to copy words outside the target vocabulary."""

from __future__ import annotations

import itertools
import math
import random

import pytest
import torch
import torch.nn.functional as F

from selfattn.data.batching.seq2seq_collate import (
    Seq2SeqBatch,
    Seq2SeqCollator,
    target_vocabulary,
)
from selfattn.data.vocab import Vocabulary
from selfattn.datatypes import Example
from selfattn.models import StackConfig
from selfattn.models.seq2seq import (
    BOS_ID,
    EOS_ID,
    NUM_SPECIALS,
    PAD_ID,
    EncodedSource,
    OutputKind,
    Seq2SeqOutput,
    Seq2SeqTransformer,
    decoder_like,
)
from selfattn.models.seq2seq_options import Seq2SeqConfig
from selfattn.tasks.seq2seq.losses import (
    SCHEDULES,
    SamplingSchedule,
    attention_budget_loss,
    attention_for_regularisers,
    coverage_loss,
    guided_attention_loss,
    scheduled_sampling_inputs,
    sequence_nll,
)
from selfattn.tasks.seq2seq.objective import Seq2SeqObjective

WORDS = [f"w{i}" for i in range(12)]


pytestmark = pytest.mark.usefixtures("one_thread")


#: One encoder layer, E=32, H=4, pre-LN, sinusoidal positions up to 256 tokens.
STACK = StackConfig(32, 4, 64, num_layers=1, positional="sinusoidal", max_len=256, norm_first=True)


def _model(output: OutputKind = "vocab", target_vocab_size: int = 9) -> Seq2SeqTransformer:
    return Seq2SeqTransformer(
        STACK,
        decoder_like(STACK, num_layers=2),
        target_vocab_size=target_vocab_size,
        source_vocab_size=len(WORDS) + 2,
        output=output,
    )


def _batch(size: int = 6, *, target: OutputKind = "vocab", seed: int = 0) -> Seq2SeqBatch:
    """Reversal examples of lengths 2…6, so both sides carry padding."""
    rng = random.Random(seed)
    examples = []
    for _ in range(size):
        tokens = tuple(rng.choice(WORDS) for _ in range(rng.randint(2, 6)))
        label = tuple(str(len(tokens) - 1 - i) for i in range(len(tokens)))
        examples.append(Example(tokens, None, label if target == "pointer" else tokens[::-1]))
    target_vocab = None if target == "pointer" else target_vocabulary([WORDS[:5]])
    return Seq2SeqCollator(Vocabulary(WORDS), target_vocab, target=target)(examples)


def _decode(
    model: Seq2SeqTransformer, batch: Seq2SeqBatch, target_in: torch.Tensor | None = None
) -> tuple[EncodedSource, Seq2SeqOutput]:
    """Encode ``batch`` and decode ``target_in`` (its own by default) with the weights."""
    encoded = model.encode(batch.source, batch.source_padding, copy_ids=batch.copy_ids)
    inputs = batch.target_in if target_in is None else target_in
    return encoded, model.decode(
        inputs, encoded, need_weights=True, num_extended=batch.num_extended
    )


def _targets(batch: int = 3, steps: int = 5, vocab: int = 7) -> torch.Tensor:
    target = torch.randint(0, vocab, (batch, steps))
    target[0, 3:] = -100
    target[2, 1:] = -100
    return target


# ---------------------------------------------------------------------- sequence_nll


def test_nll_without_smoothing_is_nll_loss() -> None:
    log_probs = torch.randn(3, 5, 7).log_softmax(-1)
    target = _targets()
    expected = F.nll_loss(log_probs.transpose(1, 2), target, ignore_index=-100)
    torch.testing.assert_close(sequence_nll(log_probs, target), expected)


@pytest.mark.parametrize("epsilon", [0.1, 0.3])
def test_smoothed_nll_of_a_vocabulary_output_is_cross_entropy(epsilon: float) -> None:
    logits = torch.randn(3, 5, 7)
    target = _targets()
    expected = F.cross_entropy(logits.transpose(1, 2), target, label_smoothing=epsilon)
    got = sequence_nll(logits.log_softmax(-1), target, label_smoothing=epsilon)
    torch.testing.assert_close(got, expected)


@pytest.mark.parametrize("epsilon", [0.0, 0.1, 0.3])
def test_all_finite_smoothing_is_the_masked_one_without_masks(epsilon: float) -> None:
    """The vocabulary output's shortcut (a plain mean for the spread term) gives the
    masked computation's loss and gradient, in float64 to the last bits."""
    logits = torch.randn(3, 5, 7, dtype=torch.float64, requires_grad=True)
    target = _targets()
    results = []
    for all_finite in (False, True):
        loss = sequence_nll(
            logits.log_softmax(-1), target, label_smoothing=epsilon, all_finite=all_finite
        )
        (grad,) = torch.autograd.grad(loss, logits)
        results.append((loss, grad))
    torch.testing.assert_close(results[1], results[0], rtol=1e-12, atol=1e-12)
    expected = F.cross_entropy(logits.transpose(1, 2), target, label_smoothing=epsilon)
    torch.testing.assert_close(results[1][0], expected)


def test_smoothing_skips_impossible_ids_and_stays_finite() -> None:
    """Pointer-style outputs: −inf ids get no smoothing mass, even at padding (PAD = −inf)."""
    logits = torch.randn(3, 5, 9, requires_grad=True)
    impossible = torch.tensor([0, 1, 2, 7])  # PAD, UNK, BOS and one more id
    masked = logits.index_fill(-1, impossible, float("-inf"))
    target = _targets(vocab=9)
    target = target.masked_fill(torch.isin(target, impossible), EOS_ID)
    loss = sequence_nll(masked.log_softmax(-1), target, label_smoothing=0.2)
    possible = torch.tensor([3, 4, 5, 6, 8])
    remap = torch.full((9,), -100).index_copy(0, possible, torch.arange(5))
    expected = F.cross_entropy(
        logits[..., possible].transpose(1, 2),
        torch.where(target == -100, -100, remap[target.clamp(min=0)]),
        label_smoothing=0.2,
    )
    torch.testing.assert_close(loss, expected)
    loss.backward()
    assert logits.grad is not None and torch.isfinite(logits.grad).all()


@pytest.mark.parametrize("output", ["pointer", "copy"])
def test_smoothed_nll_of_pointer_and_copy_models_has_finite_gradients(output: OutputKind) -> None:
    model = _model(output)
    batch = _batch(target=output)
    _, out = _decode(model, batch)
    loss = sequence_nll(out.log_probs, batch.target_out, label_smoothing=0.1)
    loss.backward()
    assert torch.isfinite(loss)
    assert all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)


def test_nll_with_no_real_position_is_zero_and_differentiable() -> None:
    log_probs = torch.randn(2, 3, 5).log_softmax(-1).requires_grad_()
    loss = sequence_nll(log_probs, torch.full((2, 3), -100), label_smoothing=0.1)
    loss.backward()
    assert float(loss.detach()) == 0.0


def test_nll_refuses_bad_arguments() -> None:
    with pytest.raises(ValueError, match="label_smoothing"):
        sequence_nll(torch.zeros(1, 2, 3), torch.zeros(1, 2, dtype=torch.long), label_smoothing=1)
    with pytest.raises(ValueError, match=r"\(B, T, V\)"):
        sequence_nll(torch.zeros(1, 2, 3), torch.zeros(1, 3, dtype=torch.long))


# ---------------------------------------------------------------------- scheduled sampling


def test_ratio_zero_is_teacher_forcing_exactly() -> None:
    model, batch = _model(), _batch()
    encoded, forced = _decode(model, batch)
    inputs = scheduled_sampling_inputs(model, encoded, batch, 0.0)
    assert torch.equal(inputs, batch.target_in)
    _, sampled = _decode(model, batch, inputs)
    assert torch.equal(
        sequence_nll(sampled.log_probs, batch.target_out),
        sequence_nll(forced.log_probs, batch.target_out),
    )


@pytest.mark.parametrize("output", ["vocab", "pointer", "copy"])
def test_ratio_one_feeds_every_first_pass_argmax(output: OutputKind) -> None:
    model, batch = _model(output).eval(), _batch(target=output)
    encoded, first = _decode(model, batch)
    guesses = first.log_probs.argmax(-1)  # (B, T): position t − 1 guesses input t
    inputs = scheduled_sampling_inputs(model, encoded, batch, 1.0)
    real = ~batch.target_padding[:, 1:]
    assert torch.equal(inputs[:, 0], batch.target_in[:, 0])  # BOS kept
    assert torch.equal(inputs[:, 1:][real], guesses[:, :-1][real])
    assert (inputs[:, 1:][~real] == PAD_ID).all()
    _, second = _decode(model, batch, inputs)  # extended ids in copy mode read as <unk>
    assert torch.isfinite(sequence_nll(second.log_probs, batch.target_out))


def test_partial_ratio_replaces_about_that_share_reproducibly() -> None:
    model, batch = _model().eval(), _batch(64)
    encoded, first = _decode(model, batch)
    guesses = first.log_probs.argmax(-1)[:, :-1]
    gold = batch.target_in[:, 1:]
    differs = (guesses != gold) & ~batch.target_padding[:, 1:]
    draws = [
        scheduled_sampling_inputs(
            model, encoded, batch, 0.3, generator=torch.Generator().manual_seed(7)
        )
        for _ in range(2)
    ]
    assert torch.equal(draws[0], draws[1])
    taken = draws[0][:, 1:] == guesses
    assert int(differs.sum()) > 100
    assert abs(float(taken[differs].float().mean()) - 0.3) < 0.08
    assert torch.equal(draws[0][:, 1:][~taken], gold[~taken])


def test_sampled_replacements_are_ids_the_model_can_emit() -> None:
    model, batch = _model("pointer"), _batch(16, target="pointer")
    encoded, _ = _decode(model, batch)
    inputs = scheduled_sampling_inputs(model, encoded, batch, 1.0, sample=True)
    fed, real = inputs[:, 1:], ~batch.target_padding[:, 1:]
    source_len = (~batch.source_padding).sum(1, keepdim=True)
    a_position = (fed >= NUM_SPECIALS) & (fed < NUM_SPECIALS + source_len)  # never padding
    assert ((fed == EOS_ID) | a_position)[real].all()


@pytest.mark.parametrize("kind", SCHEDULES)
def test_schedules_rise_monotonically_within_bounds(kind: str) -> None:
    schedule = SamplingSchedule(kind, max_ratio=0.4, steps=1000)  # type: ignore[arg-type]
    ratios = [schedule.ratio(step) for step in range(0, 5001, 25)]
    assert all(0.0 <= r <= 0.4 for r in ratios)
    assert all(a <= b for a, b in itertools.pairwise(ratios))
    assert schedule.ratio(10**9) == pytest.approx(0.4)  # no overflow far out


def test_schedule_endpoints() -> None:
    linear = SamplingSchedule("linear", max_ratio=0.5, steps=1000)
    assert (linear.ratio(0), linear.ratio(500), linear.ratio(1000)) == (0.0, 0.25, 0.5)
    exponential = SamplingSchedule("exponential", max_ratio=0.5, steps=1000)
    assert exponential.ratio(0) == 0.0
    assert exponential.ratio(1000) == pytest.approx(0.99 * 0.5)
    sigmoid = SamplingSchedule("inverse_sigmoid", max_ratio=0.5, steps=1000)
    assert sigmoid.ratio(500) == pytest.approx(0.25)
    k = 0.5 / sigmoid.ratio(0) - 1  # ratio(0) = max / (1 + k)
    assert k * math.log(k) == pytest.approx(500)
    assert sigmoid.ratio(1000) == pytest.approx(0.5 * k / (1 + k))
    assert SamplingSchedule("constant", max_ratio=0.2).ratio(0) == 0.2


def test_schedule_refuses_bad_settings() -> None:
    with pytest.raises(ValueError, match="unknown"):
        SamplingSchedule("cosine")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="max_ratio"):
        SamplingSchedule("linear", max_ratio=1.5)
    with pytest.raises(ValueError, match="steps"):
        SamplingSchedule("linear", steps=0)
    with pytest.raises(ValueError, match="step"):
        SamplingSchedule("linear").ratio(-1)


# ---------------------------------------------------------------------- attention penalties


def _lengths_padding(lengths: list[int], width: int) -> torch.Tensor:
    return torch.arange(width)[None, :] >= torch.tensor(lengths)[:, None]


def _alignment(targets: list[int], sources: list[int], *, anti: bool = False) -> torch.Tensor:
    """``(B, T, S)`` hard attention of real step t on its proportional source position."""
    attention = torch.rand(len(targets), max(targets), max(sources))  # garbage at padding
    for b, (t_len, s_len) in enumerate(zip(targets, sources, strict=True)):
        attention[b, :t_len, :s_len] = 0.0
        for t in range(t_len):
            s = t * s_len // t_len
            attention[b, t, s_len - 1 - s if anti else s] = 1.0
    return attention


def test_guided_attention_is_zero_on_the_diagonal_and_large_off_it() -> None:
    targets, sources = [4, 6], [8, 6]  # per-example lengths, padded to (6, 8)
    target_padding, source_padding = _lengths_padding(targets, 6), _lengths_padding(sources, 8)
    diagonal = guided_attention_loss(_alignment(targets, sources), source_padding, target_padding)
    anti = guided_attention_loss(
        _alignment(targets, sources, anti=True), source_padding, target_padding
    )
    uniform = torch.full((2, 6, 8), 1 / 8)
    spread = guided_attention_loss(uniform, source_padding, target_padding)
    assert float(diagonal) == pytest.approx(0.0, abs=1e-7)
    # The anti-diagonal crosses the diagonal mid-way, so it beats uniform attention by less
    # than it beats the diagonal.
    assert float(anti) > 1.4 * float(spread) > 0
    assert float(anti) > 0.5 / 6  # over half the largest possible, 1 / S_b


def test_guided_attention_ignores_padding_and_averages_layers_and_heads() -> None:
    target_padding, source_padding = _lengths_padding([3, 5], 5), _lengths_padding([7, 4], 7)
    heads = torch.rand(2, 4, 5, 7).softmax(-1)
    noisy = heads.clone()
    pad = target_padding[:, None, :, None] | source_padding[:, None, None, :]
    noisy[pad.expand_as(noisy)] = 5.0
    loss = guided_attention_loss([heads], source_padding, target_padding)
    assert torch.equal(guided_attention_loss([noisy], source_padding, target_padding), loss)
    other = torch.rand(2, 4, 5, 7).softmax(-1)
    both = guided_attention_loss([heads, other], source_padding, target_padding)
    torch.testing.assert_close(
        both, (loss + guided_attention_loss(other, source_padding, target_padding)) / 2
    )
    per_head = [
        guided_attention_loss(heads[:, h], source_padding, target_padding) for h in range(4)
    ]
    torch.testing.assert_close(loss, torch.stack(per_head).mean())


def test_guided_attention_refuses_bad_arguments() -> None:
    padding = torch.zeros(1, 3, dtype=torch.bool)
    with pytest.raises(ValueError, match="sigma"):
        guided_attention_loss(torch.rand(1, 3, 3), padding, padding, sigma=0)
    with pytest.raises(ValueError, match="does not match"):
        guided_attention_loss(torch.rand(1, 3, 4), padding, padding)
    with pytest.raises(ValueError, match="need_weights"):
        guided_attention_loss([], padding, padding)


def test_coverage_is_zero_for_fresh_positions_and_counts_repeats() -> None:
    no_padding = torch.zeros(1, 3, dtype=torch.bool)
    once = F.one_hot(torch.tensor([[2, 0, 1]]), 3).float()
    assert float(coverage_loss(once, no_padding, no_padding)) == 0.0
    twice = F.one_hot(torch.tensor([[0, 0, 1]]), 3).float()  # position 0 attended again
    assert float(coverage_loss(twice, no_padding, no_padding)) == pytest.approx(1 / 3)
    half = torch.tensor([[[1.0, 0, 0], [0.5, 0.5, 0], [0, 1.0, 0]]])  # 0.5 + 0.5 repeated
    assert float(coverage_loss(half, no_padding, no_padding)) == pytest.approx(1 / 3)


def test_coverage_ignores_padding() -> None:
    target_padding, source_padding = _lengths_padding([2, 3], 4), _lengths_padding([3, 2], 3)
    attention = torch.zeros(2, 4, 3)
    attention[0, 0, 0] = attention[0, 1, 0] = 1.0  # a repeat: 1 over 2 real steps
    attention[1, 0, 1] = attention[1, 1, 0] = attention[1, 2, 1] = 1.0  # a repeat: 1 over 3
    clean = coverage_loss(attention, source_padding, target_padding)
    assert float(clean) == pytest.approx(2 / 5)
    noisy = attention.clone()
    noisy[target_padding] = 1.0
    noisy[1, :, 2] = 1.0  # a padded source position
    assert torch.equal(coverage_loss(noisy, source_padding, target_padding), clean)


def test_attention_budget_wants_every_position_read_tau_times() -> None:
    no_padding = torch.zeros(1, 3, dtype=torch.bool)
    once = F.one_hot(torch.tensor([[2, 0, 1]]), 3).float()
    assert float(attention_budget_loss(once, no_padding, no_padding, tau=1.0)) == 0.0
    assert float(attention_budget_loss(once, no_padding, no_padding)) == 0.0  # τ = T / S = 1
    twice = F.one_hot(torch.tensor([[0, 0, 1]]), 3).float()  # (1 − 2)² + 0 + (1 − 0)²
    assert float(attention_budget_loss(twice, no_padding, no_padding, tau=1.0)) == 2.0
    target_padding, source_padding = _lengths_padding([3, 2], 3), _lengths_padding([3, 2], 3)
    padded = torch.cat([twice, torch.rand(1, 3, 3)])
    padded[1, :2, :2] = torch.eye(2)
    assert float(attention_budget_loss(padded, source_padding, target_padding)) == 1.0


def test_regularised_attention_is_the_pointer_or_the_last_layers_head_mean() -> None:
    batch = _batch(target="copy")
    _, copied = _decode(_model("copy"), batch)
    assert attention_for_regularisers(copied) is copied.pointer_attention
    _, out = _decode(_model(), _batch())
    attention = attention_for_regularisers(out)
    assert out.cross_attentions is not None
    torch.testing.assert_close(attention, out.cross_attentions[-1].mean(1))
    torch.testing.assert_close(attention.sum(-1), torch.ones(attention.shape[:2]))
    out.cross_attentions = None
    with pytest.raises(ValueError, match="need_weights"):
        attention_for_regularisers(out)


# ---------------------------------------------------------------------- copying end to end


def _greedy(model: Seq2SeqTransformer, batch: Seq2SeqBatch, max_steps: int) -> torch.Tensor:
    """Argmax decoding from BOS, re-reading the whole prefix each step: ``(B, ≤ max_steps)``."""
    encoded = model.encode(batch.source, batch.source_padding, copy_ids=batch.copy_ids)
    ids = torch.full((batch.source.shape[0], 1), BOS_ID)
    done = torch.zeros(batch.source.shape[0], dtype=torch.bool)
    for _ in range(max_steps):
        out = model.decode(ids, encoded, num_extended=batch.num_extended)
        step = out.log_probs[:, -1].argmax(-1).masked_fill(done, PAD_ID)
        ids = torch.cat([ids, step[:, None]], dim=1)
        done |= step == EOS_ID
        if done.all():
            break
    return ids[:, 1:]


def test_copy_output_copies_words_outside_the_target_vocabulary() -> None:
    """Target vocabulary: the specials and three words; every other source word reaches the
    target only through its extended id, which changes from example to example — so the
    words can only be produced by pointing at them."""
    rng = random.Random(0)
    kept = ["a", "b", "c"]
    words = kept + [f"w{i}" for i in range(300)]
    source_vocab, target_vocab = Vocabulary(words), target_vocabulary([kept])
    collate = Seq2SeqCollator(source_vocab, target_vocab, target="copy")

    def copies(pool: list[str], count: int) -> Seq2SeqBatch:
        sources = [tuple(rng.choice(pool) for _ in range(rng.randint(2, 5))) for _ in range(count)]
        return collate([Example(tokens, None, tokens) for tokens in sources])

    model = Seq2SeqTransformer(
        STACK,
        decoder_like(STACK),
        target_vocab_size=len(target_vocab),
        source_vocab_size=len(source_vocab),
        output="copy",
    )
    steps = 250
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    # Clipping and a linear decay keep the end of this short run from spiking.
    decay = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1 - step / steps)
    objective = Seq2SeqObjective(Seq2SeqConfig())  # teacher forcing, unsmoothed NLL
    for step in range(steps):
        loss = objective.loss(model, copies(words, 32), step)
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        decay.step()

    test = copies(words[len(kept) :], 200)
    real = test.target_out != -100
    assert (test.target_out[real & (test.target_out != EOS_ID)] >= len(target_vocab)).all()
    with torch.no_grad():
        predicted = _greedy(model.eval(), test, max_steps=test.target_out.shape[1])
    exact = [
        predicted.shape[1] >= n and torch.equal(predicted[b, :n], test.target_out[b, :n])
        for b, n in enumerate(real.sum(1).tolist())
    ]
    assert sum(exact) / len(exact) >= 0.9
