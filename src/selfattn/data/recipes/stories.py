"""Question answering over short stories, generated the way the bAbI tasks were (Weston et
al. 2015): people move between places and pick up and drop objects; questions ask where
someone or something is, or was. Lecture 003's memory networks read such stories: each
fact is one memory, the question attends over them, hop after hop.

Three tasks, each with a 1k and a 10k version (training questions):

* ``qa1`` single supporting fact: "where is mary ?" — her last move.
* ``qa2`` two supporting facts: "where is the milk ?" — who holds it (or dropped it),
  and where that person went.
* ``qa3`` three supporting facts: "where was the milk before the office ?" — the object's
  places in order, through its holder's moves.

Each example is one question with the story so far, as one line of words: every fact ends
with ``.``, the question with ``?`` (``mary went to the kitchen . john moved to the garden
. where is mary ?``), the label its one-word answer. A user's file of the same lines reads
as any text classification data (``answer<TAB>story``). :func:`supporting_facts` gives,
per example, the facts the answer rests on (0-based, counted among the story's facts), so
what a model attends to can be scored. This is not the bAbI data (whose licence and
download are not ours to ship): the same world and question types, generated from a seed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from selfattn.data.fetch.sources import GeneratedSource
from selfattn.data.registry import Recipe, register
from selfattn.datatypes import DatasetSplits, Example
from selfattn.specials import STORY_END, STORY_QUESTION

PEOPLE = ("mary", "john", "daniel", "sandra")
PLACES = ("bathroom", "hallway", "garden", "office", "bedroom", "kitchen")
OBJECTS = ("football", "apple", "milk")
MOVES = ("moved to", "went to", "journeyed to", "travelled to", "went back to")
GRABS = ("got", "picked up", "grabbed", "took")
DROPS = ("dropped", "put down", "discarded", "left")

#: Questions per story (as in bAbI) and the most facts a story grows to.
QUESTIONS_PER_STORY = 5
MAX_FACTS = {1: 20, 2: 40, 3: 60}
#: Questions per split of the 1k and 10k versions.
SIZES = {"1k": {"train": 1_000, "dev": 100, "test": 1_000}}
SIZES["10k"] = {"train": 10_000, "dev": 1_000, "test": 1_000}
TASK_NAMES = {1: "single supporting fact", 2: "two supporting facts", 3: "three supporting facts"}


@dataclass
class Question:
    """One question about a story: its words, answer and supporting facts."""

    words: tuple[str, ...]
    answer: str
    support: tuple[int, ...]
    facts: int  # facts of the story told before it


@dataclass
class _World:
    """The state of a story being told (what each fact changed, and which fact did)."""

    rng: np.random.Generator
    facts: list[tuple[str, ...]] = field(default_factory=list)
    where: dict[str, tuple[str, int]] = field(default_factory=dict)  # person → (place, fact)
    holder: dict[str, tuple[str, int]] = field(default_factory=dict)  # object → (person, fact)
    resting: dict[str, tuple[str, tuple[int, ...]]] = field(default_factory=dict)
    # object → its places in order, each with the facts that put it there
    history: dict[str, list[tuple[str, tuple[int, ...]]]] = field(default_factory=dict)

    def choice(self, options: tuple[str, ...] | list[str]) -> str:
        return options[int(self.rng.integers(len(options)))]

    def tell(self, *words: str) -> int:
        self.facts.append((*" ".join(words).split(), STORY_END))
        return len(self.facts) - 1

    def move(self) -> None:
        person = self.choice(PEOPLE)
        here = self.where.get(person, ("", -1))[0]
        place = self.choice([p for p in PLACES if p != here])
        fact = self.tell(person, self.choice(MOVES), "the", place)
        self.where[person] = (place, fact)
        for thing, (holder, grabbed) in self.holder.items():
            if holder == person:
                self._arrive(thing, place, (grabbed, fact))

    def grab(self) -> bool:
        placed = [p for p in PEOPLE if p in self.where]
        free = [o for o in OBJECTS if o not in self.holder]
        if not placed or not free:
            return False
        person, thing = self.choice(placed), self.choice(free)
        place, moved = self.where[person]
        resting = self.resting.get(thing)
        if resting is not None and resting[0] != place:
            return False  # it lies elsewhere: only someone there can take it
        fact = self.tell(person, self.choice(GRABS), "the", thing, "there")
        self.holder[thing] = (person, fact)
        self.resting.pop(thing, None)
        self._arrive(thing, place, (moved, fact))
        return True

    def drop(self) -> bool:
        held = sorted(self.holder)
        if not held:
            return False
        thing = self.choice(held)
        person = self.holder.pop(thing)[0]
        place, moved = self.where[person]
        fact = self.tell(person, self.choice(DROPS), "the", thing)
        self.resting[thing] = (place, (moved, fact))
        return True

    def _arrive(self, thing: str, place: str, support: tuple[int, ...]) -> None:
        places = self.history.setdefault(thing, [])
        if not places or places[-1][0] != place:
            places.append((place, support))

    # ------------------------------------------------------------------ questions

    def where_is_person(self) -> Question | None:
        known = sorted(self.where)
        if not known:
            return None
        person = self.choice(known)
        place, fact = self.where[person]
        return Question(("where", "is", person, STORY_QUESTION), place, (fact,), len(self.facts))

    def where_is_object(self) -> Question | None:
        known = sorted(set(self.holder) | set(self.resting))
        if not known:
            return None
        thing = self.choice(known)
        if thing in self.holder:
            person, grabbed = self.holder[thing]
            place, moved = self.where[person]
            support: tuple[int, ...] = tuple(sorted((grabbed, moved)))
        else:
            place, support = self.resting[thing]
            support = tuple(sorted(support))
        words = ("where", "is", "the", thing, STORY_QUESTION)
        return Question(words, place, support, len(self.facts))

    def where_was_object(self) -> Question | None:
        """ "where was the X before the Y ?" for a place Y the object reached once."""
        options = []
        for thing, places in sorted(self.history.items()):
            names = [place for place, _ in places]
            for index in range(1, len(places)):
                if names.count(names[index]) == 1:
                    options.append((thing, index))
        if not options:
            return None
        thing, index = options[int(self.rng.integers(len(options)))]
        places = self.history[thing]
        (before, first), (after, second) = places[index - 1], places[index]
        support = tuple(sorted({*first, *second}))
        words = ("where", "was", "the", thing, "before", "the", after, STORY_QUESTION)
        return Question(words, before, support, len(self.facts))


def _story(task: int, rng: np.random.Generator) -> tuple[list[tuple[str, ...]], list[Question]]:
    """One story's facts and the questions asked along it."""
    world = _World(rng)
    ask = {1: world.where_is_person, 2: world.where_is_object, 3: world.where_was_object}[task]
    questions: list[Question] = []
    while len(questions) < QUESTIONS_PER_STORY and len(world.facts) < MAX_FACTS[task]:
        roll = rng.random()
        if task == 1 or roll < 0.5 or not (world.grab() if roll < 0.8 else world.drop()):
            world.move()
        if len(world.facts) >= 2 and rng.random() < (0.5 if task == 1 else 0.25):
            question = ask()
            if question is not None and (task == 1 or len(question.support) > 1):
                questions.append(question)
    return world.facts, questions


def generate_stories(
    task: int, size: int, seed: int | list[int], name: str = "qa"
) -> tuple[list[Example], list[tuple[int, ...]]]:
    """``size`` questions of task ``task`` (1, 2 or 3) and each one's supporting facts.

    Args:
        task: 1 single, 2 two, 3 three supporting facts.
        size: the number of questions (examples).
        seed: anything :func:`numpy.random.default_rng` takes (same seed, same stories).
        name: prefix of each example's ``source`` (``name[i]``).

    Returns:
        ``(examples, support)``: sequence-task examples (the story so far and the question
        as tokens, the answer as label) and per example the 0-based indices of the facts
        the answer rests on.
    """
    if task not in TASK_NAMES:
        raise ValueError(f"story task must be 1, 2 or 3, got {task}")
    rng = np.random.default_rng(seed)
    examples: list[Example] = []
    support: list[tuple[int, ...]] = []
    while len(examples) < size:
        facts, questions = _story(task, rng)
        for question in questions[: size - len(examples)]:
            words = [word for fact in facts[: question.facts] for word in fact]
            tokens = (*words, *question.words)
            examples.append(Example(tokens, None, question.answer, f"{name}[{len(examples)}]"))
            support.append(question.support)
    return examples, support


def _recipe_splits(
    recipe_name: str, task: int, version: str, seed: int
) -> dict[str, tuple[list[Example], list[tuple[int, ...]]]]:
    return {
        split: generate_stories(task, size, [seed, task, number], f"{recipe_name}/{split}")
        for number, (split, size) in enumerate(SIZES[version].items())
    }


def supporting_facts(recipe_name: str, split: str) -> list[tuple[int, ...]]:
    """Per example of a story recipe's split, the facts its answer rests on.

    Raises:
        KeyError: not a story recipe or split.
    """
    from selfattn.data.registry import RECIPES

    recipe = RECIPES[recipe_name]
    if not recipe_name.startswith("qa") or not isinstance(recipe.source, GeneratedSource):
        raise KeyError(f"{recipe_name!r} is not a story recipe")
    task, version = _parse(recipe_name)
    return _recipe_splits(recipe_name, task, version, recipe.source.seed)[split][1]


def _parse(recipe_name: str) -> tuple[int, str]:
    """``qa2-10k`` → ``(2, "10k")``; ``qa1`` → ``(1, "1k")``."""
    task, _, version = recipe_name.removeprefix("qa").partition("-")
    return int(task), version or "1k"


def stories_builder(task: int, version: str) -> Callable[[Recipe, list[Path]], DatasetSplits]:
    """The builder of recipe ``qa{task}`` (``-10k``): each split from its own generator,
    seeded ``[source seed, task, split number]``."""

    def build(recipe: Recipe, paths: list[Path]) -> DatasetSplits:
        assert isinstance(recipe.source, GeneratedSource)
        splits = _recipe_splits(recipe.name, task, version, recipe.source.seed)
        return recipe.splits(*(examples for examples, _ in splits.values()))

    return build


register(
    *(
        Recipe(
            name=f"qa{task}" + ("" if version == "1k" else f"-{version}"),
            task="sequence",
            input="text",
            description=(
                f"Story question answering, {TASK_NAMES[task]} (generated as bAbI task "
                f"{task} was, Weston et al. 2015): people move between 6 places and carry 3 "
                f"objects; one question per example with its story so far, facts ending "
                f"in '.', the one-word answer as label. {SIZES[version]['train']:,} train, "
                f"{SIZES[version]['dev']:,} dev, {SIZES[version]['test']:,} test questions."
            ),
            source=GeneratedSource(seed=0),
            licence="generated data, no restrictions",
            build=stories_builder(task, version),
        )
        for task in TASK_NAMES
        for version in ("1k", "10k")
    )
)
