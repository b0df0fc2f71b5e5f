"""The KV cache changes nothing but speed, and the decoder never looks at the future."""

from __future__ import annotations

import pytest
import torch

from selfattn.decoding import IncrementalDecoder, greedy
from selfattn.models.seq2seq import BOS_ID, NUM_SPECIALS

from .helpers import assert_cache_changes_nothing, step_by_step

OUTPUTS = ("vocab", "pointer", "copy")
POSITIONALS = ("sinusoidal", "rotary", "relative", "learned")


@pytest.mark.parametrize("positional", POSITIONALS)
@pytest.mark.parametrize("output", OUTPUTS)
def test_cached_greedy_equals_recomputing_the_prefix(
    make_model, make_batch, output: str, positional: str
) -> None:
    model = make_model(output, positional)
    encoded, num_extended = make_batch(model)
    runs = [
        greedy(model, encoded, max_len=10, min_len=6, num_extended=num_extended, use_cache=c)
        for c in (True, False)
    ]
    cached, full = runs
    assert cached.tokens == full.tokens
    assert min(cached.lengths) >= 6
    torch.testing.assert_close(cached.step_log_probs, full.step_log_probs, atol=1e-5, rtol=0)
    torch.testing.assert_close(cached.log_prob, full.log_prob, atol=1e-5, rtol=0)


@pytest.mark.parametrize("output", OUTPUTS)
def test_cached_beam_search_and_sampling_equal_recomputing(
    make_model, make_batch, output: str
) -> None:
    model = make_model(output, "rotary")
    encoded, num_extended = make_batch(model)
    assert_cache_changes_nothing(model, encoded, seed=3, atol=1e-5, num_extended=num_extended)


def test_incremental_decoder_steps_match_one_teacher_forced_pass(make_model, make_batch) -> None:
    model = make_model("vocab", "relative")
    encoded, _ = make_batch(model)
    prefix = torch.randint(NUM_SPECIALS, 12, (3, 5))
    steps, target_in = step_by_step(model, encoded, prefix)
    with torch.no_grad():
        forced = model.decode(target_in, encoded).log_probs
    # Every id's log-prob, down to −40 for unlikely ids, where float32's spacing is 4e-6.
    torch.testing.assert_close(steps, forced, atol=1e-5, rtol=1e-6)


def test_incremental_decoder_select_moves_rows_with_their_cache(make_model, make_batch) -> None:
    model = make_model("vocab", "rotary")
    encoded, _ = make_batch(model)
    state = IncrementalDecoder(model, encoded)
    state.log_probs()
    state.append(torch.tensor([5, 6, 7]))
    state.select(torch.tensor([2, 0]))
    reordered = state.log_probs()
    fresh = IncrementalDecoder(model, encoded.index_select(torch.tensor([2, 0])), use_cache=False)
    fresh.log_probs()  # the recomputing path needs no step order; it just reads tokens
    fresh.append(torch.tensor([7, 5]))
    torch.testing.assert_close(reordered, fresh.log_probs(), atol=1e-5, rtol=0)


def test_incremental_decoder_refuses_two_steps_without_a_token(make_model, make_batch) -> None:
    model = make_model()
    encoded, _ = make_batch(model)
    state = IncrementalDecoder(model, encoded)
    state.log_probs()
    with pytest.raises(RuntimeError, match="append"):
        state.log_probs()


@pytest.mark.parametrize("positional", [*POSITIONALS, "alibi", None])
@pytest.mark.parametrize("output", OUTPUTS)
def test_decoder_does_not_leak_the_future(
    make_model, make_batch, output: str, positional: str | None
) -> None:
    """Changing target_in after position t leaves the log-probs at positions ≤ t alone."""
    model = make_model(output, positional)
    encoded, num_extended = make_batch(model)
    target_in = torch.randint(NUM_SPECIALS, 10, (3, 8))
    target_in[:, 0] = BOS_ID
    changed = target_in.clone()
    changed[:, 5:] = torch.randint(NUM_SPECIALS, 10, (3, 3))
    assert not torch.equal(changed, target_in)
    with torch.no_grad():
        before = model.decode(target_in, encoded, num_extended=num_extended).log_probs
        after = model.decode(changed, encoded, num_extended=num_extended).log_probs
    torch.testing.assert_close(before[:, :5], after[:, :5], atol=1e-6, rtol=0)
    assert not torch.allclose(before[:, 5:], after[:, 5:])
