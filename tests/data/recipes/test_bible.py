"""The pure-Python SWORD zText reader behind bible-en-es, on small modules written here."""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

from selfattn.data.recipes.bible import aligned_verses, plain_text, read_bible_pairs, read_ztext


def write_ztext(folder: Path, testaments: dict[str, list[str]]) -> Path:
    """Write a zText module: every slot of a testament in one zlib block."""
    folder.mkdir(parents=True, exist_ok=True)
    for testament, slots in testaments.items():
        block, index = b"", b""
        for slot in slots:
            data = slot.encode()
            index += struct.pack("<IIH", 0, len(block), len(data))
            block += data
        compressed = zlib.compress(block)
        (folder / f"{testament}.bzs").write_bytes(
            struct.pack("<III", 0, len(compressed), len(block))
        )
        (folder / f"{testament}.bzv").write_bytes(index)
        (folder / f"{testament}.bzz").write_bytes(compressed)
    return folder


HEAD = ["", '<milestone type="x-importer"/>']


def english(folder: Path) -> Path:
    return write_ztext(
        folder,
        {
            "ot": [
                *HEAD,
                '<div osisID="Gen" sID="g1" type="book"/><title type="main">Genesis</title>',
                '<chapter n="1" osisID="Gen.1" sID="Gen.1"/>',
                '<w lemma="strong:H7225">In the beginning</w>, God created.'
                '<note placement="foot">Or, <note>nested</note> a note</note>',
                "The earth was formless &amp; empty.",
                # The book's end marker names the book too: still a verse, not a heading.
                'God said. <chapter eID="Gen.1"/><div eID="g1" osisID="Gen" type="book"/>',
                '<div osisID="Exod" sID="g2" type="book"/>',
                '<chapter n="1" osisID="Exod.1" sID="Exod.1"/>',
                "These are the names.",
                "Reuben.",
            ],
            "nt": [
                *HEAD,
                '<div osisID="Matt" sID="g3" type="book"/>',
                '<chapter n="1" osisID="Matt.1" sID="Matt.1"/>',
                # Back matter after the last chapter's end is not part of the verse.
                '<title type="x-preverse">The genealogy</title>The book of the genealogy.'
                '<chapter eID="Matt.1"/><div type="glossary"/>Abba means father.',
            ],
        },
    )


def spanish(folder: Path) -> Path:
    return write_ztext(
        folder,
        {
            "ot": [
                *HEAD,
                '<div osisID="Gen" sID="g1" type="book"/>',
                '<chapter n="1" osisID="Gen.1" sID="Gen.1"/>',
                "EN el principio crió Dios.",
                "",  # a verse this translation leaves empty
                # Word elements are words even with no space between them.
                '<w lemma="x">Y</w><transChange type="added">dijo</transChange><w>Dios</w>.',
                '<div osisID="Exod" sID="g2" type="book"/>',
                '<chapter n="1" osisID="Exod.1" sID="Exod.1"/>',
                "Estos son los nombres.",  # Exodus 1 has one verse here: another numbering
            ],
            "nt": [
                *HEAD,
                '<div osisID="Matt" sID="g3" type="book"/>',
                '<chapter n="1" osisID="Matt.1" sID="Matt.1"/>',
                "LIBRO de la generación.",
            ],
        },
    )


def test_plain_text_strips_markup() -> None:
    assert plain_text('<w lemma="x">Hi</w>, <note>a <note>b</note> c</note>you &amp; me.') == (
        "Hi, you & me."
    )
    assert plain_text('<title type="main">Genesis</title> <div sID="x"/>') == ""
    # A <w> element's edges separate words; other tags may sit inside a word.
    assert plain_text("<w>hay allí</w><transChange>también</transChange><w>bdelio</w>") == (
        "hay allí también bdelio"
    )
    assert plain_text("preguntándo<transChange>le</transChange>, <w>Dios</w>.") == (
        "preguntándole, Dios."
    )


def test_read_ztext_counts_verses_from_the_headings(tmp_path: Path) -> None:
    verses, sizes = read_ztext(english(tmp_path / "web"))
    assert verses == {
        ("Gen", 1, 1): "In the beginning, God created.",
        ("Gen", 1, 2): "The earth was formless & empty.",
        ("Gen", 1, 3): "God said.",
        ("Exod", 1, 1): "These are the names.",
        ("Exod", 1, 2): "Reuben.",
        ("Matt", 1, 1): "The book of the genealogy.",
    }
    assert sizes == {("Gen", 1): 3, ("Exod", 1): 2, ("Matt", 1): 1}


def test_alignment_skips_empty_verses_and_renumbered_chapters(tmp_path: Path) -> None:
    web, rv = english(tmp_path / "web"), spanish(tmp_path / "rv")
    refs = [ref for ref, _, _ in aligned_verses(read_ztext(web), read_ztext(rv))]
    assert refs == [("Gen", 1, 1), ("Gen", 1, 3), ("Matt", 1, 1)]
    pairs = read_bible_pairs(web, rv)
    assert [e.source for e in pairs] == ["Gen 1:1", "Gen 1:3", "Matt 1:1"]
    assert pairs[1].tokens == ("God", "said", ".") and pairs[1].label == ("Y", "dijo", "Dios", ".")
