"""The memory network as a task model: stories cut into facts and a question inside the
model, answers tied to the label words, refusals in one line."""

from __future__ import annotations

import random

import pytest
import torch

from selfattn.data.vocab import Vocabulary
from selfattn.datatypes import Batch
from selfattn.models.memory import MemoryTaskModel, split_stories
from selfattn.models.registry import model_options

from ..helpers_models import build

END, ASK = 2, 3


def _reference(row: list[int], memory_size: int) -> tuple[list[list[int]], list[int]]:
    """Facts (without ".") and question (without "?") of one row, cut in Python."""
    facts, current = [], []
    for token in row:
        if token == 0:
            continue
        if token == END:
            facts.append(current)
            current = []
        elif token != ASK:
            current.append(token)
    return facts[-memory_size:], current


@pytest.mark.parametrize("memory_size", [1, 3, 50])
def test_split_stories_matches_cutting_the_words_by_hand(memory_size: int) -> None:
    rng = random.Random(0)
    rows = []
    for _ in range(16):
        row = []
        for _ in range(rng.randint(0, 6)):
            row += [rng.randint(4, 20) for _ in range(rng.randint(1, 5))] + [END]
        row += [rng.randint(4, 20) for _ in range(rng.randint(0, 4))] + [ASK]
        rows.append(row)
    length = max(map(len, rows))
    ids = torch.tensor([row + [0] * (length - len(row)) for row in rows])
    stories = split_stories(ids, END, ASK, memory_size)
    for b, row in enumerate(rows):
        facts, question = _reference(row, memory_size)
        got = [[int(t) for t in slot if t] for slot in stories.memories[b]]
        assert got[: len(facts)] == facts
        assert all(not slot for slot in got[len(facts) :])  # empty slots after the facts
        assert [int(t) for t in stories.question[b] if t] == question
        assert int(stories.facts[b]) == row.count(END)


WORDS = Vocabulary([".", "?", "mary", "john", "went", "to", "where", "is", "kitchen", "garden"])
LABELS = ["kitchen", "garden"]


def _model(**options: object) -> MemoryTaskModel:
    config = model_options(architecture="memn2n", embed_dim=8, num_layers=2, **options)  # type: ignore[arg-type]
    model = build(config, "sequence", num_labels=len(LABELS), vocab_size=len(WORDS))
    assert isinstance(model, MemoryTaskModel)
    model.bind(WORDS, LABELS)
    return model


def _batch(*stories: str) -> Batch:
    rows = [WORDS.encode(story.split()) for story in stories]
    length = max(map(len, rows))
    ids = torch.tensor([row + [0] * (length - len(row)) for row in rows])
    return Batch(ids, None, None, ids == 0, torch.zeros(len(rows), dtype=torch.long))


def test_the_answer_is_the_networks_score_of_each_label_word() -> None:
    """Tied to the words: the logits are the network's vocabulary scores at the ids of
    the label words, in the labels' order."""
    torch.manual_seed(0)
    model = _model().eval()
    batch = _batch(
        "mary went to kitchen . where is mary ?", "john went to garden . where is john ?"
    )
    stories = model.stories(batch)
    full = model.network(stories.memories, stories.question).logits
    ids = [WORDS.token_id(label) for label in LABELS]
    torch.testing.assert_close(model(batch), full[:, ids])


def test_one_fact_is_read_whole_and_hops_see_only_facts() -> None:
    torch.manual_seed(0)
    model = _model().eval()
    hops, stories = model.hop_attention(_batch("mary went to kitchen . where is mary ?"))
    assert len(hops) == 2
    for weights in hops:
        torch.testing.assert_close(weights, torch.ones(1, 1))  # one memory: all attention
    assert stories.memories.shape == (1, 1, 4)


def test_linear_start_is_stored_with_the_weights() -> None:
    model = _model(linear_start_steps=5)
    model.start_step(4)
    assert bool(model.linear)
    restored = _model(linear_start_steps=5)
    restored.start_step(10)
    restored.load_state_dict(model.state_dict())
    assert bool(restored.linear)  # saved while linear: read back linear
    model.start_step(5)
    assert not bool(model.linear)


def test_refusals_are_one_line() -> None:
    config = model_options(architecture="memn2n")
    for task in ("token", "regression"):
        with pytest.raises(ValueError, match="one label per story"):
            build(config, task, vocab_size=10)
    with pytest.raises(ValueError, match="not words"):
        build(config, "sequence", feature_dim=4)
    with pytest.raises(ValueError, match="architecture 'memn2n' does not use it"):
        build(model_options(architecture="memn2n", num_heads=2), "sequence", vocab_size=10)
    with pytest.raises(ValueError, match="architecture 'transformer' does not use it"):
        build(model_options(memory_noise=0.1), "sequence", vocab_size=10)
    model = _model()
    with pytest.raises(ValueError, match="label 'office' is not one of"):
        model.bind(WORDS, ["kitchen", "office"])
    with pytest.raises(ValueError, match="facts ending in"):
        model.bind(Vocabulary(["kitchen", "garden"]), LABELS)
    with pytest.raises(ValueError, match="memory_tying"):
        model_options(architecture="memn2n", memory_tying="none")  # type: ignore[arg-type]
