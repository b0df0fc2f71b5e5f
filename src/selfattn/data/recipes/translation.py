"""German → English sentence pairs from the example sentences of the Ding dictionary.

Debian's ``trans-de-en`` ships the TU Chemnitz German–English dictionary (GPL-2+) as
``/usr/share/trans/de-en``: one entry a line, ``Deutsch :: English``, each side a list of
alternatives separated by `` | `` and aligned one-to-one across ``::``. Besides words and
phrases, many entries carry example sentences (here the second alternative)::

    Raunen {n} | Ein Raunen ging durch die Menge. :: murmur | A murmur went through the crowd.

:func:`read_ding_sentences` keeps those sentences (rules in :func:`sentence_pair`), which
gives a small but real translation corpus (about 17k pairs).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

from selfattn.data.batching.splits import shuffled, split_by_count
from selfattn.data.fetch.sources import DebianPackage, DebianSource
from selfattn.data.formats.text import numbered_lines, tokenize
from selfattn.data.registry import Recipe, register
from selfattn.datatypes import DataError, DatasetSplits, Example

#: Longest side kept, in tokens (after :func:`~selfattn.data.formats.text.tokenize`).
MAX_TOKENS = 40
MIN_WORDS = 3

# Innermost bracket groups: grammar ({m}, {pl}, {vt}, {+Gen.}), usage labels ([ugs.],
# [Br.]), explanations ((zoologische Ordnung)), spelling variants (<revealment>) and
# abbreviation marks (/SIDU/). Removing innermost groups repeatedly handles nesting.
_ANNOTATION = re.compile(r"\{[^{}]*\}|\[[^\[\]]*\]|\([^()]*\)|<[^<>]*>|/[A-Z]+/")
_SPACE_BEFORE_PUNCT = re.compile(r"\s+([.,!?;:])")
# Dictionary templates rather than sentences: "jdm. etw. geben", "to give sb. sth.",
# and entries that trail off ("Abschließend …").
_PLACEHOLDER = re.compile(r"\b(?:etw|jd[nmrs]?|sb|sth)\.|\bsb['’]s\b|…|\.\.\.")
_LEFTOVER = re.compile(r"[{}\[\]()<>]")
_WORD = re.compile(r"\w")
_SENTENCE_MARK = re.compile(r"[.!?]")


def strip_annotations(text: str) -> str:
    """``text`` without Ding's bracketed annotations, with tidy whitespace.

    >>> strip_annotations("das A und O [ugs.]  (Grundlage) {n} .")
    'das A und O.'
    """
    previous = None
    while previous != text:
        previous, text = text, _ANNOTATION.sub(" ", text)
    text = " ".join(text.split())
    return _SPACE_BEFORE_PUNCT.sub(r"\1", text)


def aligned_alternatives(line: str) -> list[tuple[str, str]]:
    """The ``(German, English)`` alternatives of one dictionary line, annotations removed.

    Within an alternative, ``;`` separates synonyms that are *not* aligned across the two
    sides; the first (main) one of each side is kept. A line whose two sides hold a
    different number of alternatives yields nothing (its alignment is unknown), as do
    comments and lines without `` :: ``.
    """
    return [(_main_synonym(de), _main_synonym(en)) for de, en in _raw_alternatives(line)]


def _raw_alternatives(line: str) -> list[tuple[str, str]]:
    if line.startswith("#"):
        return []
    german, sep, english = line.partition(" :: ")
    if not sep:
        return []
    de_alts, en_alts = german.split(" | "), english.split(" | ")
    if len(de_alts) != len(en_alts):
        return []
    return list(zip(de_alts, en_alts, strict=True))


def _main_synonym(alternative: str) -> str:
    # Strip before splitting at ";": braces hold semicolons too ({dealt; dealt}).
    return strip_annotations(alternative).split(";")[0].strip()


def _is_sentence(text: str) -> bool:
    return (
        text.endswith((".", "!", "?"))
        and not text[0].islower()  # "hell broke loose." is a fragment of an idiom entry
        and not _PLACEHOLDER.search(text)
        # "comes/arrives", "finished that off / put paid to that": inline alternatives
        # whose scope cannot be resolved, so no single correct sentence exists.
        and "/" not in text
        and not _LEFTOVER.search(text)  # an unbalanced bracket: a malformed annotation
    )


def sentence_pair(german: str, english: str) -> tuple[list[str], list[str]] | None:
    """Both sides tokenised if the pair is sentence-like, else ``None``.

    Sentence-like: each side ends in ``.``, ``!`` or ``?``, does not start with a
    lower-case letter, has at least 3 words and at most 40 tokens, and holds no
    dictionary placeholder (``etw.``, ``jdn.``, ``sb.``, ``sth.``, ``…``), no ``/``
    (inline alternatives) and no bracket left over from the annotations.
    """
    if not (german and english and _is_sentence(german) and _is_sentence(english)):
        return None
    source, target = tokenize(german), tokenize(english)
    for tokens in (source, target):
        words = sum(1 for t in tokens if _WORD.search(t))
        if words < MIN_WORDS or len(tokens) > MAX_TOKENS:
            return None
    return source, target


def read_ding_sentences(path: str | Path) -> list[Example]:
    """The sentence pairs of a Ding ``de-en`` file, in file order, without duplicates.

    ``tokens`` are the German tokens, ``label`` the English ones; ``source`` names the
    dictionary line. A pair identical (token by token, on both sides) to an earlier one
    is dropped; the same German sentence with a different translation is kept.
    """
    path = Path(path)
    seen: set[tuple[tuple[str, ...], tuple[str, ...]]] = set()
    examples = []
    for lineno, german, english in _alternatives(path):
        pair = sentence_pair(german, english)
        if pair is None:
            continue
        key = (tuple(pair[0]), tuple(pair[1]))
        if key in seen:
            continue
        seen.add(key)
        examples.append(Example(key[0], None, key[1], f"{path}:{lineno}"))
    return examples


def _alternatives(path: Path) -> Iterator[tuple[int, str, str]]:
    for lineno, line in numbered_lines(path):
        for german, english in _raw_alternatives(line):
            # Most alternatives are words or phrases with no sentence mark at all; skip
            # them before the (comparatively slow) annotation stripping.
            if _SENTENCE_MARK.search(german) and _SENTENCE_MARK.search(english):
                yield lineno, _main_synonym(german), _main_synonym(english)


def build_translate_de_en(recipe: Recipe, paths: list[Path]) -> DatasetSplits:
    """``translate-de-en``: the sentence pairs shuffled with seed 0; 1,000 test, 1,000 dev."""
    examples = read_ding_sentences(paths[0])
    if len(examples) < 10_000:
        # A different file behind the pinned checksum cannot happen; a truncated
        # extraction by hand can.
        raise DataError(f"{paths[0]}: only {len(examples)} sentence pairs, expected ~17,000")
    train, dev, test = split_by_count(shuffled(examples, seed=0), num_test=1_000, num_dev=1_000)
    return recipe.splits(train, dev, test)


register(
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
)
