"""A user's stories in the bAbI tasks' own format: read into the examples the qa recipes
make and trained on by the memory network (refused in one line when malformed:
readers/test_formats.py, with every reader's refusals)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from selfattn.data import load_dataset
from selfattn.data.readers.stories import is_story_file, read_stories
from selfattn.data.recipes.stories import _story, generate_stories


def _write_babi(path: Path, task: int, size: int, seed: int) -> list[tuple[int, ...]]:
    """The stories :func:`generate_stories` tells for ``seed``, in bAbI's format (facts
    capitalised, as bAbI writes them); returns each question's supporting line numbers."""
    rng = np.random.default_rng(seed)
    lines, supports, asked = [], [], 0
    while asked < size:
        facts, questions = _story(task, rng)
        line_of: dict[int, int] = {}
        number = 0
        for index, fact in enumerate(facts):
            number += 1
            line_of[index] = number
            lines.append(f"{number} {' '.join(fact[:-1]).capitalize()}.")
            for question in questions:
                if question.facts == index + 1 and asked < size:
                    number += 1
                    support = [line_of[i] for i in question.support]
                    text = " ".join(question.words[:-1]).capitalize()
                    lines.append(
                        f"{number} {text}?\t{question.answer}\t{' '.join(map(str, support))}"
                    )
                    supports.append(tuple(support))
                    asked += 1
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return supports


def test_a_babi_file_reads_as_the_recipes_examples(tmp_path: Path) -> None:
    path = tmp_path / "qa2_train.txt"
    _write_babi(path, task=2, size=60, seed=7)
    expected, _ = generate_stories(2, 60, 7)
    assert is_story_file(path)
    got = read_stories(path)
    assert [e.label for e in got] == [e.label for e in expected]
    assert [tuple(t.lower() for t in e.tokens) for e in got] == [e.tokens for e in expected]
    data = load_dataset(path, dev_fraction=0.0)  # through the user-file road
    assert data.task == "sequence" and data.input == "text" and len(data.train) == 60


def test_word_tag_files_are_not_stories(tmp_path: Path) -> None:
    tagged = tmp_path / "tags.txt"
    tagged.write_text("I/PRP saw/VBD a/DT saw/NN\n", encoding="utf-8")
    assert not is_story_file(tagged)
    assert load_dataset(tagged, dev_fraction=0.0).task == "token"
