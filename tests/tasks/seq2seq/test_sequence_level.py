"""Sequence-level training (Shen et al. 2016's minimum risk training; REINFORCE with a
leave-one-out baseline): the risk and its gradient against a float64 reference written
from the paper's formula, the properties that make the estimators right (equal costs or
rewards give no gradient), the costs against sacrebleu and an edit distance, candidates
drawn through selfattn.decoding, and the config's one-line refusals."""

from __future__ import annotations

import math
from typing import Any

import pytest
import sacrebleu
import torch

from selfattn.config import Config, DataConfig, TrainConfig
from selfattn.data.batching.seq2seq_collate import Seq2SeqBatch
from selfattn.models.registry import model_options
from selfattn.models.seq2seq import BOS_ID, EOS_ID, PAD_ID
from selfattn.models.seq2seq_builder import Seq2SeqModel, build_seq2seq_model
from selfattn.models.seq2seq_options import Seq2SeqConfig
from selfattn.models.task_model import TaskSpec
from selfattn.tasks.seq2seq.objective import Seq2SeqObjective
from selfattn.tasks.seq2seq.sequence_level import (
    SequenceLevelObjective,
    bleu_cost,
    group,
    minimum_risk,
    padded,
    reinforce_loss,
    teacher_forced_log_probs,
    token_error_cost,
)
from selfattn.tasks.task import task_named

VOCAB = 10
#: Per source, fixed candidates (ids ≥ NUM_SPECIALS); the second source repeats one, which
#: MRT's candidate set drops.
CANDIDATES = [
    [[4, 5, 6], [4, 5], [7, 8, 9, 4], [5]],
    [[6, 6], [9, 8, 7], [6, 6], [4, 4, 4, 4, 4]],
]
COSTS = [[0.1, 0.4, 0.9, 0.7], [0.2, 0.5, 0.2, 1.0]]


def _model(architecture: str) -> Seq2SeqModel:
    torch.manual_seed(0)
    sizes: dict[str, Any] = {"embed_dim": 16, "num_layers": 1, "ffn_dim": 16, "dropout": 0.0}
    if architecture == "transformer":
        sizes["num_heads"] = 2
    spec = TaskSpec(task="seq2seq", num_labels=VOCAB, vocab_size=VOCAB, max_len=16)
    config = model_options(architecture=architecture, **sizes)  # type: ignore[arg-type]
    return build_seq2seq_model(config, Seq2SeqConfig(), spec).double()


def _batch() -> Seq2SeqBatch:
    source = torch.tensor([[4, 7, 5, 9], [6, 8, PAD_ID, PAD_ID]])
    target_out = torch.tensor([[4, 5, 6, EOS_ID], [6, EOS_ID, -100, -100]])
    target_in = torch.tensor([[BOS_ID, 4, 5, 6], [BOS_ID, 6, PAD_ID, PAD_ID]])
    return Seq2SeqBatch(source, source == PAD_ID, target_in, target_out, target_out == -100)


def _reference_log_prob(model: Seq2SeqModel, batch: Seq2SeqBatch, row: int, ids: list[int]):
    """log p(y|x) one token at a time from growing prefixes of one example alone."""
    real = ~batch.source_padding[row]
    source = batch.source[row : row + 1, real]
    encoded = model.encode(source, torch.zeros_like(source, dtype=torch.bool))
    prefix, total = [BOS_ID], torch.zeros((), dtype=torch.float64)
    for token in [*ids, EOS_ID]:
        out = model.decode(torch.tensor([prefix]), encoded)
        total = total + out.log_probs[0, -1, token]
        prefix.append(token)
    return total


def _candidates_with_costs(dedupe: bool):
    kept = group(CANDIDATES, dedupe=dedupe)
    costs = []
    for row, rows in enumerate(CANDIDATES):
        seen: list[list[int]] = []
        for ids, cost in zip(rows, COSTS[row], strict=True):
            if dedupe and ids in seen:
                continue
            seen.append(ids)
            costs.append(cost)
    return kept, torch.tensor(costs, dtype=torch.float64)


@pytest.mark.parametrize("architecture", ["rnn", "transformer"])
def test_risk_and_its_gradient_match_the_float64_reference(architecture: str) -> None:
    model, batch, alpha = _model(architecture), _batch(), 0.7
    model.eval()  # dropout is 0 anyway; eval for the reference's one-row passes
    candidates, costs = _candidates_with_costs(dedupe=True)
    assert candidates.source.tolist() == [0, 0, 0, 0, 1, 1, 1]  # the repeated [6, 6] dropped
    log_probs, mask = padded(teacher_forced_log_probs(model, batch, candidates), candidates, 2)
    cost, _ = padded(costs, candidates, 2)
    risk = minimum_risk(log_probs, cost, mask, alpha)
    ours = torch.autograd.grad(risk, list(model.parameters()), allow_unused=True)

    # Shen et al. (2016) eq. 7–8 written out: Q(y) = p^α / Σ p^α over S(x), R = Σ Q Δ.
    per_source = []
    for row, rows in enumerate(CANDIDATES):
        unique = [ids for i, ids in enumerate(rows) if ids not in rows[:i]]
        deltas = [COSTS[row][rows.index(ids)] for ids in unique]
        lp = [_reference_log_prob(model, batch, row, ids) for ids in unique]
        weights = [torch.exp(alpha * value) for value in lp]
        per_source.append(sum(w * d for w, d in zip(weights, deltas, strict=True)) / sum(weights))
    reference = sum(per_source) / len(per_source)
    expected = torch.autograd.grad(reference, list(model.parameters()), allow_unused=True)

    hand = []  # the same risk from plain floats
    for row, rows in enumerate(CANDIDATES):
        unique = [ids for i, ids in enumerate(rows) if ids not in rows[:i]]
        lp = [_reference_log_prob(model, batch, row, ids).item() for ids in unique]
        z = sum(math.exp(alpha * v) for v in lp)
        hand.append(
            sum(
                math.exp(alpha * v) / z * COSTS[row][rows.index(ids)]
                for v, ids in zip(lp, unique, strict=True)
            )
        )
    assert risk.item() == pytest.approx(sum(hand) / 2, abs=1e-12)
    assert risk.item() == pytest.approx(reference.item(), abs=1e-12)
    for a, b in zip(ours, expected, strict=True):
        if a is None or b is None:
            assert a is None and b is None
            continue
        torch.testing.assert_close(a, b, rtol=1e-9, atol=1e-12)
    assert any(a is not None and a.abs().max() > 1e-6 for a in ours)


def _gradients(loss: torch.Tensor, model: Seq2SeqModel) -> list[torch.Tensor]:
    grads = torch.autograd.grad(
        loss, list(model.parameters()), allow_unused=True, retain_graph=True
    )
    return [g for g in grads if g is not None]


def test_equal_costs_give_no_mrt_gradient() -> None:
    model, batch = _model("rnn"), _batch()
    candidates = group(CANDIDATES, dedupe=True)
    log_probs, mask = padded(teacher_forced_log_probs(model, batch, candidates), candidates, 2)
    risk = minimum_risk(log_probs, torch.full_like(log_probs, 0.6), mask, 5e-3)
    assert risk.item() == pytest.approx(0.6, abs=1e-12)  # Q sums to 1 over each S(x)
    assert all(g.abs().max() < 1e-12 for g in _gradients(risk, model))


def test_reinforce_matches_its_formula_and_equal_rewards_give_no_gradient() -> None:
    model, batch = _model("transformer"), _batch()
    candidates = group(CANDIDATES, dedupe=False)  # samples stay as drawn
    flat = teacher_forced_log_probs(model, batch, candidates)
    log_probs, mask = padded(flat, candidates, 2)
    rewards = -torch.tensor(COSTS, dtype=torch.float64)
    loss = reinforce_loss(log_probs, rewards, mask)
    # −(1/k) Σ_i (r_i − mean of the others' r) log p_i, averaged over the two sources.
    reference = 0.0
    for row in range(2):
        r = rewards[row].tolist()
        for i in range(4):
            baseline = (sum(r) - r[i]) / 3
            reference = reference - (r[i] - baseline) * flat[row * 4 + i] / 4
    reference = reference / 2
    assert loss.item() == pytest.approx(reference.item(), abs=1e-12)
    for a, b in zip(_gradients(loss, model), _gradients(reference, model), strict=True):
        torch.testing.assert_close(a, b, rtol=1e-9, atol=1e-12)

    equal = reinforce_loss(log_probs, torch.full_like(rewards, -0.3), mask)
    assert all(g.abs().max() < 1e-12 for g in _gradients(equal, model))


def test_costs_are_sacrebleus_sentence_bleu_and_the_token_error_rate() -> None:
    hypothesis, reference = "the cat sat on a mat .", "the cat sat on the mat ."
    expected = 1 - sacrebleu.sentence_bleu(hypothesis, [reference]).score / 100
    assert bleu_cost(hypothesis, reference) == pytest.approx(expected)
    assert bleu_cost(reference, reference) == pytest.approx(0.0)
    assert 0 < bleu_cost(hypothesis, reference) < 1
    # One substitution and one deletion against four reference digits.
    assert token_error_cost("one two four", "one two three four five") == pytest.approx(2 / 5)
    assert token_error_cost("", "one two") == pytest.approx(1.0)


def _objective(train: TrainConfig) -> SequenceLevelObjective:
    def text_of(ids: list[int], batch: Seq2SeqBatch, row: int) -> str:
        return " ".join(f"w{i}" for i in ids)

    return SequenceLevelObjective(
        train, Seq2SeqConfig(), text_of, Seq2SeqObjective(Seq2SeqConfig())
    )


def test_candidates_come_from_decoding_in_eval_mode_and_costs_score_them() -> None:
    model, batch = _model("rnn"), _batch()
    model.train()
    torch.manual_seed(3)
    train = TrainConfig(
        objective="mrt", sequence_samples=3, sequence_candidates="both", mrt_reference=True
    )
    objective = _objective(train)
    candidates = objective.candidates(model, batch)
    assert model.training  # put back
    for row, gold in enumerate([[4, 5, 6], [6]]):
        mine = [
            ids
            for ids, s in zip(candidates.ids, candidates.source.tolist(), strict=True)
            if s == row
        ]
        assert len({tuple(ids) for ids in mine}) == len(mine)  # deduplicated
        assert gold in mine and 2 <= len(mine) <= 3 + 3 + 1
        assert not any({PAD_ID, BOS_ID, EOS_ID} & set(ids) for ids in mine)  # outputs only
    costs = objective.costs(batch, candidates)
    for ids, source, cost in zip(
        candidates.ids, candidates.source.tolist(), costs.tolist(), strict=True
    ):
        gold = " ".join(f"w{i}" for i in [[4, 5, 6], [6]][source])
        assert cost == pytest.approx(bleu_cost(" ".join(f"w{i}" for i in ids), gold), abs=1e-6)
    loss = objective.loss(model, batch, 0)
    assert loss.requires_grad and 0.0 <= loss.item() <= 1.0

    torch.manual_seed(3)
    reinforce = _objective(TrainConfig(objective="reinforce", sequence_samples=3))
    loss = reinforce.loss(model, batch, 0)  # reported: the samples' mean cost
    torch.manual_seed(3)
    drawn = reinforce.candidates(model, batch)
    assert len(drawn.ids) == 6  # k per source, repeats kept
    assert loss.item() == pytest.approx(reinforce.costs(batch, drawn).mean().item(), abs=1e-6)


def test_refusals_are_one_line() -> None:
    cases = [
        ({"objective": "mrt", "sequence_samples": 1}, "train.sequence_samples must be >= 2"),
        ({"objective": "mrt", "mrt_alpha": -1.0}, "train.mrt_alpha must be > 0"),
        ({"mrt_alpha": 0.1}, 'set train.objective = "mrt"'),
        ({"objective": "reinforce", "sequence_candidates": "beam"}, "needs samples"),
    ]
    for fields, message in cases:
        with pytest.raises(ValueError, match=message) as error:
            TrainConfig(**fields)
        assert "\n" not in str(error.value)
    with pytest.raises(ValueError, match=r"train\.label_smoothing: read only by the MLE loss"):
        _objective(TrainConfig(objective="mrt", label_smoothing=0.1))
    config = Config(DataConfig("pos-wsj"), train=TrainConfig(objective="reinforce"))
    with pytest.raises(ValueError, match="it is for seq2seq tasks; this dataset is a token"):
        task_named("token", config)
