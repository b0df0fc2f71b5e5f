"""``speaker-jv``: speaker identification from Japanese vowel utterances (UCI, via sktime).

Nine speakers, each utterance 7-29 frames × 12 LPC cepstra, read from sktime's ``.ts``
files: the shipped TEST is the test split; 3 utterances per speaker of the shipped TRAIN
(seed 0) are the dev split, the rest train.
"""

from __future__ import annotations

from pathlib import Path

from selfattn.data.batching.splits import stratified_holdout
from selfattn.data.fetch.sources import PyPISource
from selfattn.data.formats.numeric import read_ts
from selfattn.data.registry import Recipe, register
from selfattn.datatypes import DatasetSplits


def _build_speaker_jv(recipe: Recipe, paths: list[Path]) -> DatasetSplits:
    train, dev = stratified_holdout(read_ts(paths[0]), 0.1, seed=0)
    return recipe.splits(train, dev, read_ts(paths[1]))


register(
    Recipe(
        name="speaker-jv",
        task="sequence",
        input="vectors",
        description=(
            "Speaker identification from Japanese vowel utterances: 9 speakers, 7-29 "
            "frames × 12 LPC cepstra (UCI, via sktime). Test: the shipped TEST (370). "
            "Dev: 3 utterances per speaker of the shipped TRAIN (seed 0); train: the "
            "other 243."
        ),
        source=PyPISource(
            package="sktime",
            version="1.2.0",
            sdist=False,
            sha256="dbffc6731d2d683b668dceb5e2bbc5804bebc8446b4c580803a281684d90e4ae",
            members=(
                "sktime/datasets/data/JapaneseVowels/JapaneseVowels_TRAIN.ts",
                "sktime/datasets/data/JapaneseVowels/JapaneseVowels_TEST.ts",
            ),
            download_mb=8.2,
        ),
        licence="UCI Japanese Vowels (CC BY 4.0) via sktime",
        build=_build_speaker_jv,
    ),
)
