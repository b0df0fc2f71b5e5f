"""The bAbI-style story recipes: every answer follows from the story as written (read back
by a separate interpreter of the sentences), the supporting facts name what the question
asks about, and the same seed gives the same stories."""

from __future__ import annotations

import pytest

from selfattn.data import load_dataset
from selfattn.data.recipes.stories import (
    OBJECTS,
    PEOPLE,
    PLACES,
    generate_stories,
    supporting_facts,
)


def facts_of(tokens: tuple[str, ...]) -> tuple[list[list[str]], list[str]]:
    """The story's facts (split at '.') and the question's words."""
    facts, current = [], []
    for token in tokens:
        current.append(token)
        if token == ".":
            facts.append(current[:-1])
            current = []
    assert current[-1] == "?"
    return facts, current[:-1]


def answer(tokens: tuple[str, ...]) -> str:
    """Re-read the story sentence by sentence and answer its question."""
    facts, question = facts_of(tokens)
    where: dict[str, str] = {}
    holder: dict[str, str] = {}
    place_of: dict[str, str] = {}
    visited: dict[str, list[str]] = {}

    def arrive(thing: str, place: str) -> None:
        trail = visited.setdefault(thing, [])
        if not trail or trail[-1] != place:
            trail.append(place)

    for words in facts:
        person = words[0]
        assert person in PEOPLE
        things = [word for word in words if word in OBJECTS]
        if not things:
            assert words[-1] in PLACES
            where[person] = words[-1]
            for thing, who in holder.items():
                if who == person:
                    arrive(thing, words[-1])
        elif words[-1] == "there":
            holder[things[0]] = person
            place_of.pop(things[0], None)
            arrive(things[0], where[person])
        else:
            del holder[things[0]]
            place_of[things[0]] = where[person]
    if question[:2] == ["where", "is"] and question[2] in PEOPLE:
        return where[question[2]]
    if question[:2] == ["where", "is"]:
        thing = question[3]
        return where[holder[thing]] if thing in holder else place_of[thing]
    thing, after = question[3], question[6]
    trail = visited[thing]
    return trail[trail.index(after) - 1]


@pytest.mark.parametrize("task", [1, 2, 3])
def test_every_answer_follows_from_its_story(task: int) -> None:
    examples, support = generate_stories(task, 300, [0, task, 0])
    assert len(examples) == len(support) == 300
    for example, facts in zip(examples, support, strict=True):
        assert example.tokens is not None
        assert answer(example.tokens) == example.label, " ".join(example.tokens)
        story, question = facts_of(example.tokens)
        assert all(0 <= index < len(story) for index in facts)
        assert len(facts) == len(set(facts)) >= (1 if task == 1 else task)
        subject = question[2] if task == 1 else question[3]
        assert any(subject in story[index] for index in facts)  # the support names it


def test_the_same_seed_gives_the_same_stories_and_splits_differ() -> None:
    first, second = generate_stories(2, 50, [0, 2, 0]), generate_stories(2, 50, [0, 2, 0])
    assert first == second
    data = load_dataset("qa1")
    assert (len(data.train), len(data.dev), len(data.test)) == (1000, 100, 1000)
    assert data.task == "sequence" and data.input == "text"
    assert {e.tokens for e in data.train[:50]} != {e.tokens for e in data.test[:50]}
    assert len(load_dataset("qa3-10k").train) == 10_000
    assert supporting_facts("qa1", "test")[0] == generate_stories(1, 1, [0, 1, 2])[1][0]


def test_refusals() -> None:
    with pytest.raises(ValueError, match="story task must be 1, 2 or 3"):
        generate_stories(4, 1, 0)
    with pytest.raises(KeyError, match="not a story recipe"):
        supporting_facts("sentiment-rt", "test")
