"""Beam search: K = 1 is greedy, a wide enough beam is exact search, n-gram blocking blocks."""

from __future__ import annotations

import pytest
import torch

from selfattn.attention.cache import RowMoves
from selfattn.decoding import beam as beam_module
from selfattn.decoding import beam_search, greedy, length_penalty_factor, repeated_ngrams
from selfattn.models.seq2seq import NUM_SPECIALS

from .helpers import assert_every_sequence_found, teacher_forced

OUTPUTS = ("vocab", "pointer", "copy")


@pytest.mark.parametrize("alpha", [0.0, 1.0, 2.0])
@pytest.mark.parametrize("output", OUTPUTS)
def test_beam_of_one_is_greedy(make_model, make_batch, output: str, alpha: float) -> None:
    model = make_model(output)
    encoded, num_extended = make_batch(model, batch=4)
    reference = greedy(model, encoded, max_len=10, num_extended=num_extended)
    beam = beam_search(
        model,
        encoded,
        beam_size=1,
        max_len=10,
        length_penalty=alpha,
        num_extended=num_extended,
    )
    assert beam.tokens == reference.tokens
    torch.testing.assert_close(beam.log_prob, reference.log_prob, atol=1e-4, rtol=0)
    assert torch.equal(beam.finished, reference.finished)


def test_a_beam_wider_than_the_search_space_finds_every_hypothesis(make_model) -> None:
    """Pointer output over 2 source positions, at most 3 tokens: 1 + 2 + 4 + 8 = 15
    sequences. A beam of 16 keeps them all, so its n-best is exact search, each
    hypothesis scored as teacher forcing scores it; the best beats greedy."""
    model = make_model("pointer", max_len=3)
    source = torch.randint(NUM_SPECIALS, 12, (2, 2))
    with torch.no_grad():
        encoded = model.encode(source, torch.zeros(2, 2, dtype=torch.bool))
    result = beam_search(model, encoded, beam_size=16, max_len=3, length_penalty=0.0, nbest=True)
    reference = greedy(model, encoded, max_len=3)
    assert result.nbest is not None
    positions = [NUM_SPECIALS, NUM_SPECIALS + 1]
    assert_every_sequence_found(model, encoded, result, positions, tolerance=1e-4)
    for row, hypotheses in enumerate(result.nbest):
        assert [h.score for h in hypotheses] == sorted((h.score for h in hypotheses), reverse=True)
        assert float(result.log_prob[row]) >= float(reference.log_prob[row]) - 1e-5


@pytest.mark.parametrize("output", OUTPUTS)
def test_beam_scores_at_least_greedy_on_random_models(make_model, make_batch, output) -> None:
    """Plain sums (α = 0). Not a theorem per example (greedy's path can drop out of the
    beam, then every kept path can end worse; ~1% of examples on random models), so the
    claim is checked over a batch: almost always ≥, better on average."""
    model = make_model(output)
    encoded, num_extended = make_batch(model, batch=16)
    reference = greedy(model, encoded, max_len=8, num_extended=num_extended)
    beam = beam_search(
        model, encoded, beam_size=4, max_len=8, length_penalty=0.0, num_extended=num_extended
    )
    at_least = beam.log_prob >= reference.log_prob - 1e-5
    assert at_least.float().mean() >= 0.9
    assert beam.log_prob.mean() > reference.log_prob.mean()
    torch.testing.assert_close(beam.score, beam.log_prob)  # α = 0: the score is the sum


def test_beam_search_decodes_each_example_as_if_alone(make_model, make_batch) -> None:
    model = make_model("copy", "rotary")
    encoded, num_extended = make_batch(model, batch=4)
    together = beam_search(model, encoded, beam_size=3, max_len=8, num_extended=num_extended)
    for row in range(4):
        alone = beam_search(
            model,
            encoded.index_select(torch.tensor([row])),
            beam_size=3,
            max_len=8,
            num_extended=num_extended,
        )
        assert alone.tokens[0] == together.tokens[row]
        assert float(alone.score[0]) == pytest.approx(float(together.score[row]), abs=1e-4)


@pytest.mark.parametrize("alpha", [0.0, 0.6, 1.0])
def test_nbest_scores_are_length_penalised_sums_best_first(make_model, make_batch, alpha) -> None:
    model = make_model("pointer")
    encoded, _ = make_batch(model)
    result = beam_search(
        model, encoded, beam_size=4, max_len=6, min_len=2, length_penalty=alpha, nbest=True
    )
    assert result.nbest is not None
    for row, hypotheses in enumerate(result.nbest):
        assert hypotheses and hypotheses[0].tokens == result.tokens[row]
        scores = [h.score for h in hypotheses]
        assert scores == sorted(scores, reverse=True)
        for h in hypotheses:
            assert len(h.tokens) >= 2
            assert h.score == pytest.approx(
                h.log_prob / length_penalty_factor(len(h.tokens) + 1, alpha), rel=1e-5
            )
            assert h.log_prob == pytest.approx(
                teacher_forced(model, encoded, row, h.tokens), abs=1e-4
            )


def test_length_penalty_is_gnmt() -> None:
    assert length_penalty_factor(7, 0.0) == 1.0
    assert length_penalty_factor(1, 1.0) == 1.0
    assert length_penalty_factor(7, 1.0) == pytest.approx(2.0)
    assert length_penalty_factor(13, 0.5) == pytest.approx(3**0.5)


def test_repeated_ngrams_bans_what_would_close_a_seen_ngram() -> None:
    tokens = torch.tensor([[4, 5, 6, 4, 5], [4, 4, 4, 4, 4]])

    def banned(n: int) -> list[list[int]]:
        mask = repeated_ngrams(tokens, n, 10)
        return [row.nonzero().flatten().tolist() for row in mask]

    assert banned(1) == [[4, 5, 6], [4]]
    assert banned(2) == [[6], [4]]  # "5 6" was seen; after "4" only "4" follows
    assert banned(3) == [[6], [4]]  # "4 5 6"; "4 4 4"
    assert banned(6) == [[], []]  # longer than the rows
    assert not repeated_ngrams(tokens[:, :0], 2, 10).any()


@pytest.mark.parametrize("n", [1, 2, 3])
def test_ngram_blocking_keeps_every_ngram_unique(make_model, make_batch, n: int) -> None:
    model = make_model("vocab")  # random tied-output models repeat one token forever
    encoded, _ = make_batch(model)
    free = beam_search(model, encoded, beam_size=3, max_len=8, min_len=6, length_penalty=0.0)
    blocked = beam_search(
        model,
        encoded,
        beam_size=3,
        max_len=8,
        min_len=6,
        length_penalty=0.0,
        no_repeat_ngram_size=n,
        nbest=True,
    )

    def repeats(tokens: list[int]) -> bool:
        grams = [tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1)]
        return len(grams) != len(set(grams))

    assert any(repeats(tokens) for tokens in free.tokens)  # otherwise nothing is tested
    assert blocked.nbest is not None
    for hypotheses in blocked.nbest:
        for h in hypotheses:
            assert not repeats(h.tokens), h.tokens
            # min_len is met whenever the vocabulary allows it (8 symbols + UNK for n = 1)
            assert len(h.tokens) >= 6


def test_each_parent_keeps_its_row_for_its_first_hypothesis() -> None:
    """Example 0's best hypotheses come from rows 1, 1, 0, 3 and example 1's from 5, 5, 5,
    4: the first child of each parent stays in its parent's row, the others go to the
    rows no hypothesis continues (2; 6 and 7), copied from their parents, which stay."""
    order, moved = beam_module._in_parent_rows([[1, 1, 0, 3], [5, 5, 5, 4]], 4)
    assert order.tolist() == [2, 0, 1, 3, 7, 4, 5, 6]
    assert moved.rows.tolist() == [2, 6, 7] and moved.sources.tolist() == [1, 5, 5]
    assert moved.any
    order, moved = beam_module._in_parent_rows([[2, 0, 1]], 3)  # ranks change, rows do not
    assert order.tolist() == [1, 2, 0] and not moved.any


@pytest.mark.parametrize("output", ["vocab", "copy"])
def test_beams_in_their_parents_rows_search_as_best_first_rows(
    make_model, make_batch, monkeypatch: pytest.MonkeyPatch, output: str
) -> None:
    """Beam search with each hypothesis in its parent's row decodes bit for bit what it
    decodes with the K rows of an example in rank order (every row moved that changed)."""
    model = make_model(output)
    encoded, num_extended = make_batch(model, batch=4)

    def search() -> object:
        return beam_search(
            model, encoded, beam_size=3, max_len=10, num_extended=num_extended, nbest=True
        )

    placed = search()

    def best_first(parents: list[list[int]], k: int) -> tuple[torch.Tensor, RowMoves]:
        index = torch.tensor(parents).view(-1)
        return torch.arange(index.numel()), RowMoves.of(index)

    monkeypatch.setattr(beam_module, "_in_parent_rows", best_first)
    ranked = search()
    for field in ("tokens", "nbest"):
        assert getattr(placed, field) == getattr(ranked, field)
    for field in ("log_prob", "score", "step_log_probs", "finished"):
        assert torch.equal(getattr(placed, field), getattr(ranked, field))
