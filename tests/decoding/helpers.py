"""What the decoding tests share: a sequence's log-probability by teacher forcing, a prefix
fed to the incremental decoder one token at a time, the check that the KV cache changes
no search, and the check that a beam wider than the search space returns every
sequence."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import pytest
import torch

from selfattn.decoding import DecodeResult, IncrementalDecoder, beam_search, sample
from selfattn.models.encoder_decoder import EncoderDecoder
from selfattn.models.seq2seq import BOS_ID, EOS_ID
from selfattn.models.seq2seq_outputs import EncodedSource


def teacher_forced(
    model: EncoderDecoder, encoded: EncodedSource, row: int, tokens: Sequence[int]
) -> float:
    """log p(tokens, EOS | source ``row``), every position decoded at once."""
    target_in = torch.tensor([[BOS_ID, *tokens]])
    target_out = torch.tensor([[*tokens, EOS_ID]])
    with torch.no_grad():
        log_probs = model.decode(target_in, encoded.index_select(torch.tensor([row]))).log_probs
    return float(log_probs.gather(-1, target_out.unsqueeze(-1)).sum())


def step_by_step(
    model: EncoderDecoder, encoded: EncodedSource, prefix: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """``prefix`` ``(B, T)`` fed to an :class:`IncrementalDecoder` one token at a time:
    the ``(B, T, V)`` log-probabilities of its steps, and the ``(B, T)`` decoder inputs
    (BOS, then ``prefix`` without its last token) of the teacher-forced pass that must give
    the same. Runs in the caller's grad mode."""
    state = IncrementalDecoder(model, encoded)
    steps = []
    for t in range(prefix.shape[1]):
        steps.append(state.log_probs())
        state.append(prefix[:, t])
    target_in = torch.cat([torch.full((prefix.shape[0], 1), BOS_ID), prefix[:, :-1]], dim=1)
    return torch.stack(steps, dim=1), target_in


def assert_cache_changes_nothing(
    model: EncoderDecoder,
    encoded: EncodedSource,
    *,
    seed: int,
    atol: float,
    num_extended: int = 0,
) -> None:
    """Beam search (K = 3) and sampling (a generator seeded ``seed``), 8 tokens each, give
    the same tokens with the KV cache as recomputing every prefix, and scores within
    ``atol``: the cache, and whatever moves with a re-ranked beam, changes nothing."""
    beams = [
        beam_search(model, encoded, beam_size=3, max_len=8, num_extended=num_extended, use_cache=c)
        for c in (True, False)
    ]
    assert beams[0].tokens == beams[1].tokens
    torch.testing.assert_close(beams[0].score, beams[1].score, atol=atol, rtol=0)
    draws = [
        sample(
            model,
            encoded,
            max_len=8,
            generator=torch.Generator().manual_seed(seed),
            num_extended=num_extended,
            use_cache=c,
        )
        for c in (True, False)
    ]
    assert draws[0].tokens == draws[1].tokens
    torch.testing.assert_close(draws[0].log_prob, draws[1].log_prob, atol=atol, rtol=0)


def assert_every_sequence_found(
    model: EncoderDecoder,
    encoded: EncodedSource,
    result: DecodeResult,
    ids: Sequence[int],
    *,
    tolerance: float,
) -> None:
    """Each row's n-best of ``result`` holds every sequence of at most 3 of ``ids``, each
    with the log-probability teacher forcing gives it (within ``tolerance``), and the row's
    answer is the most probable of them: a beam that kept them all did exact search."""
    assert result.nbest is not None
    every = [list(s) for n in range(4) for s in itertools.product(ids, repeat=n)]
    for row, hypotheses in enumerate(result.nbest):
        exact = {tuple(s): teacher_forced(model, encoded, row, s) for s in every}
        found = {tuple(h.tokens): h.log_prob for h in hypotheses}
        assert found.keys() == exact.keys()
        for tokens, log_prob in found.items():
            assert log_prob == pytest.approx(exact[tokens], abs=tolerance)
        assert result.tokens[row] == list(max(exact, key=exact.__getitem__))
