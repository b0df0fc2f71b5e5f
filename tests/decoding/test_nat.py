"""Non-autoregressive decoding: lengths from the predictor (scaled), one parallel pass."""

from __future__ import annotations

import pytest
import torch

from selfattn.decoding import nat_lengths, non_autoregressive
from selfattn.decoding.common import banned_ids
from selfattn.models.seq2seq import BOS_ID, EOS_ID, PAD_ID

OUTPUTS = ("vocab", "pointer", "copy")


def _predicted(model, encoded) -> torch.Tensor:
    with torch.no_grad():
        return model.predict_length(encoded).argmax(dim=-1)


@pytest.mark.parametrize("scale", [1.0, 0.5, 1.5, 0.25])
@pytest.mark.parametrize("output", OUTPUTS)
def test_lengths_are_the_rounded_scaled_prediction(make_model, make_batch, output, scale) -> None:
    model = make_model(output)
    encoded, num_extended = make_batch(model, batch=8)
    with torch.no_grad():  # spread the predictions over 0 … max_len: score the deviation
        real = (~encoded.padding).unsqueeze(-1).float()  # of each row's pooled memory
        pooled = (encoded.memory * real).sum(1) / real.sum(1)  # from the batch mean
        model.length_head.weight.normal_()
        model.length_head.bias.copy_(-model.length_head.weight @ pooled.mean(0))
    predicted = _predicted(model, encoded)
    assert len(set(predicted.tolist())) > 1
    result = non_autoregressive(model, encoded, length_scale=scale, num_extended=num_extended)
    expected = [min(max(round(n * scale), 1), model.max_len) for n in predicted.tolist()]
    assert result.lengths == expected
    assert bool(result.finished.all())


def test_half_the_scale_halves_the_lengths(make_model, make_batch) -> None:
    """The lecture's "speak twice as fast": divide the predicted length by two."""
    model = make_model()
    encoded, _ = make_batch(model, batch=4)
    lengths = [2, 6, 10, 16]
    full = non_autoregressive(model, encoded, lengths=lengths)
    half = non_autoregressive(model, encoded, lengths=lengths, length_scale=0.5)
    assert full.lengths == lengths
    assert half.lengths == [1, 3, 5, 8]


def test_given_lengths_are_kept_exactly_and_clamped(make_model, make_batch) -> None:
    model = make_model("pointer")
    encoded, _ = make_batch(model, batch=3)
    assert non_autoregressive(model, encoded, lengths=torch.tensor([1, 7, 16])).lengths == [
        1,
        7,
        16,
    ]
    assert non_autoregressive(model, encoded, lengths=[0, 3, 9]).lengths == [1, 3, 9]
    assert non_autoregressive(model, encoded, lengths=[4, 8, 9], length_scale=3.0).lengths == [
        12,
        16,
        16,
    ]
    assert nat_lengths(torch.tensor([5, 3]), 0.5, 16).tolist() == [2, 2]  # halves to even


@pytest.mark.parametrize("output", OUTPUTS)
def test_one_parallel_pass_with_the_argmax_of_allowed_ids(make_model, make_batch, output) -> None:
    """Every position is the argmax over allowed ids (EOS never) of ONE decoder call on
    BOS inputs without the causal mask; padding past each row's length."""
    model = make_model(output)
    encoded, num_extended = make_batch(model, batch=3)
    lengths = torch.tensor([2, 5, 4])
    calls = []
    original = model.decode

    def counting(*args, **kwargs):
        calls.append(kwargs)
        return original(*args, **kwargs)

    model.decode = counting  # type: ignore[method-assign]
    result = non_autoregressive(model, encoded, lengths=lengths, num_extended=num_extended)
    del model.decode
    assert len(calls) == 1 and calls[0]["causal"] is False
    padding = torch.arange(5)[None, :] >= lengths[:, None]
    target_in = torch.full((3, 5), BOS_ID).masked_fill(padding, PAD_ID)
    with torch.no_grad():
        log_probs = model.decode(
            target_in, encoded, target_padding=padding, causal=False, num_extended=num_extended
        ).log_probs
    banned = banned_ids(model, encoded, log_probs.shape[-1], num_extended)
    banned[:, EOS_ID] = True
    best = log_probs.masked_fill(banned[:, None], -torch.inf).argmax(-1)
    for row, n in enumerate(lengths.tolist()):
        assert result.tokens[row] == best[row, :n].tolist()
        assert EOS_ID not in result.tokens[row]
        expected = log_probs[row, torch.arange(n), best[row, :n]].sum()
        assert float(result.log_prob[row]) == pytest.approx(float(expected), abs=1e-5)


def test_without_a_length_predictor_lengths_must_be_given(make_model, make_batch) -> None:
    model = make_model(length_predictor=False)
    encoded, _ = make_batch(model, batch=2)
    with pytest.raises(RuntimeError, match="length predictor"):
        non_autoregressive(model, encoded)
    assert non_autoregressive(model, encoded, lengths=[3, 4]).lengths == [3, 4]
