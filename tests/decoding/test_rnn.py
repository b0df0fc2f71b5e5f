"""selfattn.decoding decodes the RNN encoder–decoder through the same interface as the
Transformer: its recurrent state is the "cache" that each step reuses and beam search
reorders. Checked in float64 against teacher forcing and exhaustive search."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from selfattn.decoding import IncrementalDecoder, beam_search, greedy, sample
from selfattn.models.rnn_seq2seq import RecurrentState, RNNSeq2Seq
from selfattn.models.seq2seq import BOS_ID, EOS_ID, NUM_SPECIALS, EncodedSource

from .helpers import assert_every_sequence_found, teacher_forced

VOCAB = 12
VARIANTS = [
    {"cell": "gru", "score": "additive"},
    {"cell": "lstm", "score": "general"},
    {"cell": "gru", "score": "dot", "input_feeding": False},
]


def rnn(vocab: int = VOCAB, **options: Any) -> RNNSeq2Seq:
    """A random float64 model in eval mode, 2 + 2 layers."""
    torch.manual_seed(0)
    settings: dict[str, Any] = {
        "target_vocab_size": vocab,
        "source_vocab_size": VOCAB,
        "embed_dim": 16,
        "hidden_dim": 24,
        "max_len": 12,
        "num_layers": 2,
    }
    return RNNSeq2Seq(**(settings | options)).double().eval()


def encoded(model: RNNSeq2Seq, batch: int = 4, length: int = 6) -> EncodedSource:
    torch.manual_seed(1)
    source = torch.randint(NUM_SPECIALS, VOCAB, (batch, length))
    padding = torch.zeros(batch, length, dtype=torch.bool)
    padding[0, length // 2 :] = True
    with torch.no_grad():
        return model.encode(source.masked_fill(padding, 0), padding)


def test_the_decoder_keeps_the_recurrent_state_as_its_cache() -> None:
    model = rnn()
    state = IncrementalDecoder(model, encoded(model), max_len=5)
    assert isinstance(state.cache, RecurrentState)
    state.log_probs()
    assert state.cache.hidden is not None and state.cache.hidden.shape == (2, 4, 24)


@pytest.mark.parametrize("options", VARIANTS)
def test_greedy_is_the_argmax_path_of_teacher_forcing(options: dict[str, Any]) -> None:
    """Step by step through the recurrent state, greedy picks at every position what
    teacher forcing on its own output ranks first, and scores the sequence alike."""
    model = rnn(**options)
    memory = encoded(model)
    result = greedy(model, memory, max_len=10)
    for row, tokens in enumerate(result.tokens):
        target_in = torch.tensor([[BOS_ID, *tokens]])
        with torch.no_grad():
            log_probs = model.decode(target_in, memory.index_select(torch.tensor([row]))).log_probs
        log_probs[..., [0, BOS_ID]] = float("-inf")  # PAD and BOS are never emitted
        path = log_probs.argmax(-1)[0].tolist()
        assert path[: len(tokens)] == tokens
        if result.finished[row]:  # else EOS was forced at max_len
            assert path[-1] == EOS_ID
        exact = teacher_forced(model, memory, row, tokens)
        assert float(result.log_prob[row]) == pytest.approx(exact, abs=1e-10)
    assert result.tokens == greedy(model, memory, max_len=10, use_cache=False).tokens


@pytest.mark.parametrize("options", VARIANTS)
def test_beam_of_one_is_greedy(options: dict[str, Any]) -> None:
    model = rnn(**options)
    memory = encoded(model)
    reference = greedy(model, memory, max_len=10)
    beam = beam_search(model, memory, beam_size=1, max_len=10, length_penalty=1.0)
    assert beam.tokens == reference.tokens
    torch.testing.assert_close(beam.log_prob, reference.log_prob, rtol=0, atol=1e-10)


@pytest.mark.parametrize("options", VARIANTS)
def test_beam_hypotheses_score_as_teacher_forcing_scores_them(options: dict[str, Any]) -> None:
    """Every n-best hypothesis of a batched K = 3 search, re-scored from scratch: a beam
    that kept another row's recurrent state after re-ranking would score differently."""
    model = rnn(**options)
    memory = encoded(model)
    result = beam_search(model, memory, beam_size=3, max_len=8, nbest=True)
    assert result.nbest is not None
    for row, hypotheses in enumerate(result.nbest):
        assert hypotheses
        for hypothesis in hypotheses:
            exact = teacher_forced(model, memory, row, hypothesis.tokens)
            assert hypothesis.log_prob == pytest.approx(exact, abs=1e-9)
        alone = beam_search(model, memory.index_select(torch.tensor([row])), beam_size=3, max_len=8)
        assert alone.tokens[0] == result.tokens[row]


def test_a_beam_wider_than_the_search_space_is_exact_search() -> None:
    """Two symbols and UNK, at most 3 tokens: 1 + 3 + 9 + 27 = 40 sequences. A beam of 64
    keeps them all: its n-best is every sequence, scored as teacher forcing scores it."""
    model = rnn(vocab=NUM_SPECIALS + 2, max_len=3)
    memory = encoded(model, batch=2, length=3)
    result = beam_search(model, memory, beam_size=64, max_len=3, length_penalty=0.0, nbest=True)
    assert result.nbest is not None
    ids = [1, NUM_SPECIALS, NUM_SPECIALS + 1]  # UNK is a real prediction
    assert_every_sequence_found(model, memory, result, ids, tolerance=1e-9)


def test_sampling_is_reproducible_and_cold_sampling_is_greedy() -> None:
    model = rnn()
    memory = encoded(model)

    def draw(temperature: float) -> list[list[int]]:
        generator = torch.Generator().manual_seed(3)
        return sample(
            model, memory, max_len=10, temperature=temperature, generator=generator
        ).tokens

    assert draw(1.0) == draw(1.0)
    assert draw(1e-6) == greedy(model, memory, max_len=10).tokens
    scored = sample(model, memory, max_len=10, generator=torch.Generator().manual_seed(3))
    for row, tokens in enumerate(scored.tokens):
        if scored.finished[row]:
            exact = teacher_forced(model, memory, row, tokens)
            assert float(scored.log_prob[row]) == pytest.approx(exact, abs=1e-9)


# Random models tend to end every row at once or never; these target vocabularies (specials
# + 6, + 6, + 5) give each variant rows that end at different steps under the seeds above.
@pytest.mark.parametrize(("options", "symbols"), list(zip(VARIANTS, (6, 6, 5), strict=True)))
def test_a_batch_decodes_as_its_rows_alone(options: dict[str, Any], symbols: int) -> None:
    """Rows that end are dropped from the batch with their recurrent state (and keys):
    every row still decodes as it does alone."""
    model = rnn(vocab=NUM_SPECIALS + symbols, **options)
    memory = encoded(model, batch=6)
    batched = greedy(model, memory, max_len=10)
    assert len(set(batched.lengths)) > 1 and batched.finished.any()  # rows ended apart
    for row in range(6):
        alone = greedy(model, memory.index_select(torch.tensor([row])), max_len=10)
        assert alone.tokens[0] == batched.tokens[row]
        assert float(alone.log_prob[0]) == pytest.approx(float(batched.log_prob[row]), abs=1e-10)
