"""Stories with questions in the bAbI tasks' own text format (Weston et al. 2015), read as a
sequence task: one example per question, its story so far, the answer as the label.

The format, one story per block of numbered lines (the numbers start again at 1 for
each new story)::

    1 Mary moved to the bathroom.
    2 John went to the hallway.
    3 Where is Mary? <TAB> bathroom <TAB> 1
    4 Daniel went back to the hallway.
    5 Where is Daniel? <TAB> hallway <TAB> 4

A line with a tab is a question: the question, its answer, and the numbers of the facts
the answer rests on (optional); every other line is a fact. An example is the story's
facts so far (each ends with its ``.``) and then the question (ending with its ``?``),
split into words and punctuation the way :func:`~selfattn.data.formats.text.tokenize`
splits text: what the ``qa1`` … ``qa3`` recipes make, and what
``model.architecture = "memn2n"`` reads (facts at ``.``, the question after the last).

A ``.txt`` file is read this way when its first line starts with a number and a space
(a ``word/TAG`` file cannot: its first token would have no tag).
"""

from __future__ import annotations

import re
from pathlib import Path

from selfattn.data.formats.text import read_text, tokenize
from selfattn.datatypes import DataError, Example

__all__ = ["is_story_file", "read_stories"]

_NUMBERED = re.compile(r"^(\d+) (.*)$")


def is_story_file(path: Path) -> bool:
    """Whether ``path``'s first non-blank line is a numbered line (``1 Mary moved …``)."""
    for line in read_text(path).splitlines():
        if line.strip():
            first = line.split(maxsplit=1)[0]
            return bool(_NUMBERED.match(line)) and "/" not in first
    return False


def read_stories(path: str | Path) -> list[Example]:
    """Every question of the file as an example (see the module docstring).

    Raises:
        DataError: naming the file and line: a line without its number, numbers that do
            not count up within a story, a question without an answer, a supporting fact
            number that is not an earlier fact of the story.
    """
    path = Path(path)
    examples: list[Example] = []
    facts: list[list[str]] = []
    numbers: dict[int, int] = {}  # a fact's line number → its index in the story
    previous = 0
    for lineno, line in enumerate(read_text(path).splitlines(), start=1):
        if not line.strip():
            continue
        match = _NUMBERED.match(line.strip("\r"))
        if match is None:
            raise DataError(f"{path}:{lineno}: expected a numbered line ('1 Mary moved to …')")
        number, text = int(match.group(1)), match.group(2)
        if number == 1:
            facts, numbers = [], {}
        elif number != previous + 1:
            raise DataError(
                f"{path}:{lineno}: line number {number} follows {previous}; a story counts "
                "1, 2, 3, … and a new one starts at 1"
            )
        previous = number
        if "\t" not in text:
            words = tokenize(text)
            if not words:
                raise DataError(f"{path}:{lineno}: an empty fact")
            numbers[number] = len(facts)
            facts.append(words if words[-1] == "." else [*words, "."])
            continue
        question, answer, *rest = (part.strip() for part in text.split("\t"))
        if not answer:
            raise DataError(f"{path}:{lineno}: a question without its answer after the tab")
        for support in " ".join(rest).split():
            if not support.isdigit() or int(support) not in numbers:
                raise DataError(
                    f"{path}:{lineno}: supporting fact {support!r} is not an earlier fact "
                    "of this story"
                )
        words = tokenize(question)
        if not words:
            raise DataError(f"{path}:{lineno}: an empty question")
        if words[-1] != "?":
            words.append("?")
        tokens = tuple(word for fact in facts for word in fact) + tuple(words)
        examples.append(Example(tokens, None, answer, f"{path}:{lineno}"))
    return examples
