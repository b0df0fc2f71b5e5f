"""English → Spanish Bible verses from two Debian SWORD modules, read without libsword.

Debian ships CrossWire SWORD Bible modules as data packages: ``sword-text-web`` (World
English Bible, 2020 edition) and ``sword-text-sparv`` (Reina-Valera 1909), both public
domain. They are *zText* modules; each testament (``ot``, ``nt``) is three files:

* ``.bzs``: one 12-byte record per compressed block — offset in ``.bzz``, compressed size,
  uncompressed size (little-endian uint32);
* ``.bzv``: one 10-byte record per verse slot — block number (uint32), offset inside the
  uncompressed block (uint32), byte length (uint16; 0 = no text);
* ``.bzz``: the zlib-compressed blocks, UTF-8 OSIS markup inside.

The slots follow the module's versification: two heading slots, then per book one
heading slot, and per chapter a heading slot followed by the verses. Rather than carry
versification tables, :func:`read_ztext` reads the book and chapter from the headings'
own markup (``<chapter osisID="Gen.1" …/>``) and counts the verse slots after them.
"""

from __future__ import annotations

import html
import re
import struct
import zlib
from collections.abc import Iterator
from pathlib import Path

from selfattn.data.batching.splits import shuffled, split_by_count
from selfattn.data.fetch.sources import DebianPackage, DebianSource
from selfattn.data.formats.text import tokenize
from selfattn.data.registry import Recipe, register
from selfattn.datatypes import DataError, DatasetSplits, Example

#: ``(book osisID, chapter, verse)``, e.g. ``("Gen", 1, 1)``.
VerseRef = tuple[str, int, int]

#: Longest side kept, in tokens; verses are longer than the dictionary's sentences
#: (mean ~28 tokens, 99th percentile ~63).
MAX_TOKENS = 64

_BLOCK = struct.Struct("<III")
_SLOT = struct.Struct("<IIH")
_CHAPTER = re.compile(r'<chapter\b[^>]*\bosisID="([^".]+)\.(\d+)"')
_CHAPTER_END = re.compile(r"<chapter\b[^>]*\beID=")
_BOOK = re.compile(r'<div\b(?=[^>]*\btype="book")(?=[^>]*\bsID=")[^>]*>')  # a start, not an eID end
# Footnotes and section headings are not part of the verse's translation.
_NOT_TEXT = re.compile(r"<(note|title)\b[^>]*>(?:(?!<\1\b).)*?</\1>", re.DOTALL)
# A <w> element is a word (or word group): its edges are word boundaries, even where no
# space separates two of them ("allí</w><transChange>también"). Other inline tags can sit
# inside a word ("preguntándo<transChange>le</transChange>") and vanish without a trace.
_WORD_TAG = re.compile(r"</?w\b[^>]*>")
_TAG = re.compile(r"<[^>]*>")
_SPACE_BEFORE_PUNCT = re.compile(r"\s+([.,;:!?])")


def _slots(folder: Path, testament: str) -> Iterator[str]:
    """The raw markup of every verse slot of one testament, in order (``""`` if empty)."""
    try:
        blocks = (folder / f"{testament}.bzs").read_bytes()
        index = (folder / f"{testament}.bzv").read_bytes()
        data = (folder / f"{testament}.bzz").read_bytes()
    except OSError as err:
        raise DataError(f"{folder}: cannot read zText module ({err})") from None
    cache: dict[int, bytes] = {}  # decompressed blocks (one per book)
    for block, offset, size in _SLOT.iter_unpack(index):
        if size == 0:
            yield ""
            continue
        if block not in cache:
            start, length, _ = _BLOCK.unpack_from(blocks, block * _BLOCK.size)
            try:
                cache[block] = zlib.decompress(data[start : start + length])
            except zlib.error as err:
                raise DataError(f"{folder}/{testament}.bzz: block {block}: {err}") from None
        yield cache[block][offset : offset + size].decode("utf-8")


def plain_text(markup: str) -> str:
    """A verse's words: OSIS tags, footnotes and headings removed, whitespace tidied."""
    previous = None
    while previous != markup:  # innermost first: notes can hold notes
        previous, markup = markup, _NOT_TEXT.sub(" ", markup)
    text = " ".join(html.unescape(_TAG.sub("", _WORD_TAG.sub(" ", markup))).split())
    return _SPACE_BEFORE_PUNCT.sub(r"\1", text)


def read_ztext(folder: str | Path) -> tuple[dict[VerseRef, str], dict[tuple[str, int], int]]:
    """Every verse of a SWORD zText module, and the module's chapter sizes.

    Args:
        folder: the module folder holding ``ot.bzs`` … ``nt.bzz``.

    Returns:
        ``(verses, chapter_sizes)``: the plain text of each non-empty verse, and the
        number of verse slots of each ``(book, chapter)`` (its versification).

    Raises:
        DataError: unreadable files, or verse text before any chapter heading.
    """
    folder = Path(folder)
    verses: dict[VerseRef, str] = {}
    sizes: dict[tuple[str, int], int] = {}
    for testament in ("ot", "nt"):
        chapter: tuple[str, int] | None = None
        for markup in _slots(folder, testament):
            found = _CHAPTER.search(markup)
            if found:
                chapter = (found.group(1), int(found.group(2)))
                sizes[chapter] = 0
            elif _BOOK.search(markup):
                chapter = None  # a book heading: its intro is not a verse
            elif chapter is not None:
                sizes[chapter] += 1
                # What follows a chapter's end marker is not the verse: the WEB appends
                # its whole glossary to the slot of Revelation 22:21.
                end = _CHAPTER_END.search(markup)
                text = plain_text(markup if end is None else markup[: end.start()])
                if text:
                    verses[(*chapter, sizes[chapter])] = text
            elif plain_text(markup):
                raise DataError(f"{folder}/{testament}: verse text outside any chapter")
    return verses, sizes


def aligned_verses(
    source: tuple[dict[VerseRef, str], dict[tuple[str, int], int]],
    target: tuple[dict[VerseRef, str], dict[tuple[str, int], int]],
) -> list[tuple[VerseRef, str, str]]:
    """``(reference, source text, target text)`` for the verses both modules share.

    Two modules may follow different versifications (the WEB: NRSVA, Reina-Valera: KJV),
    where the same reference can hold different words. Only chapters with the same
    number of verse slots in both are used, which drops the chapters where numbering
    shifts (3 John 1 and Revelation 12 for these two modules).
    """
    (source_verses, source_sizes), (target_verses, target_sizes) = source, target
    return [
        (ref, text, target_verses[ref])
        for ref, text in source_verses.items()
        if ref in target_verses and source_sizes[ref[:2]] == target_sizes.get(ref[:2])
    ]


def read_bible_pairs(source_dir: str | Path, target_dir: str | Path) -> list[Example]:
    """Tokenised verse pairs of two modules, Bible order, ≤ 64 tokens a side, no duplicates.

    A pair identical to an earlier one (formulae such as "The LORD spoke to Moses,
    saying," recur verbatim in both translations) is dropped.
    """
    examples = []
    seen: set[tuple[tuple[str, ...], tuple[str, ...]]] = set()
    for (book, chapter, verse), text, translation in aligned_verses(
        read_ztext(source_dir), read_ztext(target_dir)
    ):
        pair = (tuple(tokenize(text)), tuple(tokenize(translation)))
        if not (0 < len(pair[0]) <= MAX_TOKENS and 0 < len(pair[1]) <= MAX_TOKENS):
            continue
        if pair in seen:
            continue
        seen.add(pair)
        examples.append(Example(pair[0], None, pair[1], f"{book} {chapter}:{verse}"))
    return examples


def build_bible_en_es(recipe: Recipe, paths: list[Path]) -> DatasetSplits:
    """``bible-en-es``: shuffled with seed 0; 1,000 test, 1,000 dev, the rest train."""
    folders = list(dict.fromkeys(path.parent for path in paths))  # module dirs, in order
    if len(folders) != 2:
        raise DataError(f"bible-en-es needs two module folders, got {folders}")
    examples = read_bible_pairs(folders[0], folders[1])
    train, dev, test = split_by_count(shuffled(examples, seed=0), num_test=1_000, num_dev=1_000)
    return recipe.splits(train, dev, test)


#: The pinned digest of each translation's Debian package.
_SHA256 = {
    "sword-text-web": "930b23670b352f0829a306501de4bebb5e654a2df02cde2cbe86b802177868e1",
    "sword-text-sparv": "5c87f9b2bc97457e8a872f5bae7ea7ce59cb3de1dcee73e4d4740451863694cf",
}


def _sword_text(package: str, version: str, module: str, download_mb: float) -> DebianPackage:
    """Debian's ``package`` of SWORD Bible ``module``: its compressed text (both
    testaments' index, verse and text files)."""
    folder = f"usr/share/sword/modules/texts/ztext/{module}"
    members = tuple(f"{folder}/{t}.{ext}" for t in ("ot", "nt") for ext in ("bzs", "bzv", "bzz"))
    return DebianPackage(package, version, _SHA256[package], members, download_mb)


register(
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
                _sword_text("sword-text-web", "426.0-1", "engWEB2015eb", 4.0),
                _sword_text("sword-text-sparv", "2.60-1", "spaRV1909eb", 2.7),
            )
        ),
        licence="public domain (both translations)",
        build=build_bible_en_es,
    ),
)
