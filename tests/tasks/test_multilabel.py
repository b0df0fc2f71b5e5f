"""The multilabel task type's pieces against references: the binary cross-entropy of the
sigmoid head against a float64 formula, the set metrics against hand-computed values
(empty sets included), and label sets written as seq2seq targets and read back."""

from __future__ import annotations

import random

import pytest
import torch

from selfattn.config import Config, DataConfig, TrainConfig
from selfattn.data import Example, LabelVocabulary
from selfattn.data.readers.label_sets import as_target, canonical_order, decoded_set
from selfattn.models.registry import model_options
from selfattn.models.task_model import TaskSpec, build_model_from_spec
from selfattn.specials import NO_LABELS
from selfattn.tasks.multilabel import MultiLabelTask
from selfattn.tasks.set_metrics import set_f1, set_scores

LABELS = ["modal", "number", "past", "wh-word"]


def _bce_float64(logits: torch.Tensor, targets: torch.Tensor) -> float:
    """−[y log σ(x) + (1 − y) log(1 − σ(x))], averaged, in float64."""
    x, y = logits.double(), targets.double()
    p = 1 / (1 + torch.exp(-x))
    return float(-(y * torch.log(p) + (1 - y) * torch.log(1 - p)).mean())


def _task(smoothing: float = 0.0) -> MultiLabelTask:
    config = Config(
        data=DataConfig(dataset="unused"),
        model=model_options(embed_dim=16, num_heads=2, num_layers=1, ffn_dim=16, dropout=0.0),
        train=TrainConfig(label_smoothing=smoothing),
    )
    task = MultiLabelTask(config, TaskSpec(task="multilabel", num_labels=4, vocab_size=12))
    task.restore(
        {
            "task": "multilabel",
            "input": "text",
            "vocab": {"tokens": [f"w{i}" for i in range(10)], "lowercase": False},
            "labels": LabelVocabulary(LABELS).to_dict(),
        }
    )
    return task


def _examples() -> list[Example]:
    sets = [("modal", "past"), (), ("number",), ("modal", "number", "past", "wh-word")]
    return [
        Example(tuple(f"w{(i + j) % 10}" for j in range(3 + i)), None, labels, f"x:{i}")
        for i, labels in enumerate(sets)
    ]


@pytest.mark.parametrize("smoothing", [0.0, 0.2])
def test_head_loss_is_binary_cross_entropy_in_float64(smoothing: float) -> None:
    task = _task(smoothing)
    assert task.spec is not None
    model = build_model_from_spec(task.config.model, task.spec)
    model.train()
    batch = task.collate(_examples())
    assert batch.labels.shape == (4, len(LABELS))
    assert batch.labels[1].sum() == 0 and batch.labels[3].sum() == len(LABELS)  # empty, full
    model.eval()  # the same logits for the loss and the reference (no dropout anyway)
    loss = task.loss(model, batch, step=0)
    logits = model(batch).detach()
    targets = batch.labels * (1 - smoothing) + smoothing / 2
    assert float(loss.detach()) == pytest.approx(_bce_float64(logits, targets), abs=1e-6)


def test_evaluate_scores_the_sets_above_one_half() -> None:
    """The task's metrics are those of the sets its probabilities ≥ 0.5 give."""
    task = _task()
    assert task.spec is not None
    model = build_model_from_spec(task.config.model, task.spec)
    examples = _examples()
    metrics = task.evaluate(model, task.batches_of(examples))
    model.eval()
    predicted = [
        {label for label, p in task.ranked(model, example) if p >= 0.5} for example in examples
    ]
    expected = set_scores(predicted, [set(e.label) for e in examples])
    for name in ("set_f1", "micro_f1", "exact_match", "count"):
        assert metrics[name] == pytest.approx(expected[name])
    logits = model(task.collate(examples)).detach()
    assert metrics["loss"] == pytest.approx(
        _bce_float64(logits, task.collate(examples).labels), abs=1e-6
    )


def test_set_metrics_by_hand_with_empty_sets() -> None:
    predicted = [{"a", "b"}, set(), {"a"}, set(), {"c"}]
    gold = [{"a"}, set(), set(), {"b"}, {"c"}]
    # per example 2|P∩G|/(|P|+|G|): 2/3, 1 (both empty), 0, 0, 1
    assert set_f1(set(), set()) == 1.0 and set_f1({"a"}, set()) == 0.0
    scores = set_scores(predicted, gold)
    assert scores["set_f1"] == pytest.approx((2 / 3 + 1 + 0 + 0 + 1) / 5)
    # pooled: TP = 2, |P| = 4, |G| = 3 → 2·2 / 7
    assert scores["micro_f1"] == pytest.approx(4 / 7)
    assert scores["exact_match"] == pytest.approx(2 / 5)
    assert set_scores([set()], [set()])["micro_f1"] == 1.0  # nothing to find, none claimed


def test_seq2seq_targets_round_trip_label_sets_in_canonical_order() -> None:
    rng = random.Random(0)
    names = ["b", "a", "c", "d", "e"]
    train = [Example(("w",), None, tuple(sorted(rng.sample(names, rng.randint(0, 5)))), "")]
    train += [Example(("w",), None, tuple(sorted(s)), "") for s in (("a", "b"), ("a",), ("c",))]
    order = canonical_order(train)
    counts = {n: sum(n in e.label for e in train) for n in names}
    # by frequency, most frequent first, ties alphabetical
    assert order == sorted(counts, key=lambda n: (-counts[n], n))[: len(order)]
    for _ in range(200):
        labels = rng.sample([*names, "z"], rng.randint(0, 6))  # "z": unseen in training
        target = as_target(labels + labels[:1], order)  # a duplicate is written once
        assert decoded_set(target) == frozenset(labels)
        assert len(set(target)) == len(target)
        ranks = [order.index(t) if t in order else len(order) for t in target]
        assert ranks == sorted(ranks)
        if not labels:
            assert target == (NO_LABELS,)
    assert decoded_set(["past", "past", NO_LABELS, "modal"]) == {"past", "modal"}
