"""The Ding dictionary parser behind translate-de-en, on lines taken from the real file."""

from __future__ import annotations

from pathlib import Path

import pytest

from selfattn.data import DataError, DatasetSplits, GeneratedSource, Recipe
from selfattn.data.recipes.translation import (
    aligned_alternatives,
    build_translate_de_en,
    read_ding_sentences,
    sentence_pair,
    strip_annotations,
)

# Verbatim lines of /usr/share/trans/de-en (trans-de-en 1.9-6).
RAUNEN = (
    "Raunen {n}; Geraune {n} | Ein Raunen ging durch die Menge. :: "
    "murmur; murmuring; whispering | A murmur went through the crowd."
)
SCHRECK = (
    "Oh Schreck!; Oh Graus! {interj} [humor.] | Oh Schreck, es fehlen zwei Knöpfe! :: "
    "Horrors! [humor.] | Horrors, two buttons are missing!"
)
NERVENSAEGE = (
    "Nervensäge {f}; Quälgeist {m} | Nervensägen {pl}; Quälgeister {pl} | "
    "Er geht mir auf die Nerven. | Du gehst mir auf den Geist/Senkel [Dt.]/Sack [slang]! :: "
    "nuisance; pest | nuisances; pests | He’s a pain in my neck. | "
    "You’re a pain in the neck.; You’re a pain in the arse."
)
ENTHUELLUNG = (
    "Enthüllung {f}; Offenbarwerden {n} {+Gen.} | für jdn. etwas völlig Neues sein | "
    "Die Enthüllungen in der Zeitung schockierten die Nation. :: "
    "revelation (of a surprising fact) <revealment> | to be a revelation to sb. | "
    "The revelations in the newspaper shocked the nation."
)
SIDU = "Entschuldigung, ich verstehe nicht. :: Sorry, I don't understand. /SIDU/"
SEEK = (
    "sich etw. holen {vt} [fin.] | einholend :: to seek {sought; sought} sth. (from sb.) | seeking"
)


def test_strip_annotations_removes_every_kind_and_tidies_space() -> None:
    assert strip_annotations(
        "Aale {pl}; Aalartige {pl} (Anguilliformes) (zoologische Ordnung)"
    ) == ("Aale; Aalartige")
    assert strip_annotations("das A und O [ugs.]") == "das A und O"
    assert strip_annotations("revelation (of a surprising fact) <revealment>") == "revelation"
    assert strip_annotations("Sorry, I don't understand. /SIDU/") == "Sorry, I don't understand."
    assert strip_annotations("Horrors! [humor.]") == "Horrors!"
    # Nested brackets and a space left in front of the full stop.
    assert strip_annotations("Er kam (spät (sehr)) an [ugs.] .") == "Er kam an."


def test_alternatives_are_aligned_and_the_main_synonym_kept() -> None:
    assert aligned_alternatives(RAUNEN) == [
        ("Raunen", "murmur"),
        ("Ein Raunen ging durch die Menge.", "A murmur went through the crowd."),
    ]
    # The semicolon inside {sought; sought} is not a synonym separator.
    assert aligned_alternatives(SEEK) == [
        ("sich etw. holen", "to seek sth."),
        ("einholend", "seeking"),
    ]
    assert aligned_alternatives(NERVENSAEGE)[3][1] == "You’re a pain in the neck."
    assert aligned_alternatives("A | B :: a") == []  # misaligned: 2 vs 1 alternatives
    assert aligned_alternatives("# Version :: devel 2023-01-30") == []
    assert aligned_alternatives("no separator here") == []


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        (RAUNEN, [("Ein Raunen ging durch die Menge .", "A murmur went through the crowd .")]),
        (
            SCHRECK,
            [("Oh Schreck , es fehlen zwei Knöpfe !", "Horrors , two buttons are missing !")],
        ),
        # "Geist/Senkel/Sack" is an inline alternative: dropped.
        (NERVENSAEGE, [("Er geht mir auf die Nerven .", "He’s a pain in my neck .")]),
        # "jdn." / "sb." are dictionary placeholders, not sentences.
        (
            ENTHUELLUNG,
            [
                (
                    "Die Enthüllungen in der Zeitung schockierten die Nation .",
                    "The revelations in the newspaper shocked the nation .",
                )
            ],
        ),
        (SIDU, [("Entschuldigung , ich verstehe nicht .", "Sorry , I don't understand .")]),
        (SEEK, []),
    ],
)
def test_sentence_pairs_of_real_lines(line: str, expected: list[tuple[str, str]]) -> None:
    found = []
    for german, english in aligned_alternatives(line):
        pair = sentence_pair(german, english)
        if pair is not None:
            found.append((" ".join(pair[0]), " ".join(pair[1])))
    assert found == expected


def test_sentence_rule_rejections() -> None:
    ok = ("Das ist gut.", "That is good.")
    assert sentence_pair(*ok) is not None
    assert sentence_pair("Das ist gut", "That is good.") is None  # no final mark
    assert sentence_pair("Sehr gut!", "Very good!") is None  # 2 words
    assert sentence_pair("Die Hölle brach los.", "hell broke loose.") is None  # lower-case start
    assert sentence_pair("Er gab jdm. etw. zurück.", "He gave sth. back.") is None
    assert sentence_pair("Es kam (so.", "It came so.") is None  # unbalanced bracket
    long_de = " ".join(["Wort"] * 40) + "."
    assert sentence_pair(long_de, "That is good.") is None  # 41 tokens
    assert sentence_pair(" ".join(["Wort"] * 39) + ".", "That is good.") is not None
    quoted = sentence_pair("„Hamlet“ ist Pflichtlektüre.", "'Hamlet' is required reading.")
    assert quoted is not None  # a quote or a digit may start a sentence


def test_read_ding_sentences_dedups_and_names_lines(tmp_path: Path) -> None:
    path = tmp_path / "de-en"
    path.write_text(
        "# Version :: devel\n"
        f"{RAUNEN}\n"
        "\n"
        f"{SCHRECK}\n"
        # The same pair again (other annotations), then another translation of it.
        "Ein Raunen ging durch die Menge. [geh.] :: A murmur went through the crowd.\n"
        "Ein Raunen ging durch die Menge. :: A whisper went through the crowd.\n",
        encoding="utf-8",
    )
    examples = read_ding_sentences(path)
    assert [e.source for e in examples] == [f"{path}:2", f"{path}:4", f"{path}:6"]
    assert examples[0].tokens == ("Ein", "Raunen", "ging", "durch", "die", "Menge", ".")
    assert examples[0].label == ("A", "murmur", "went", "through", "the", "crowd", ".")
    assert examples[2].label[1] == "whisper" and examples[0].features is None


def _fake_recipe() -> Recipe:
    return Recipe(
        name="translate-de-en",
        task="seq2seq",
        input="text",
        description="fake",
        source=GeneratedSource(0),
        licence="test",
        build=build_translate_de_en,
    )


def _fake_dictionary(path: Path, num_pairs: int) -> Path:
    lines = [
        f"Satz {{m}} | Das ist Satz {i}. :: sentence | This is sentence {i}."
        for i in range(num_pairs)
    ]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_split_sizes_and_determinism(tmp_path: Path) -> None:
    path = _fake_dictionary(tmp_path / "de-en", 10_500)
    first: DatasetSplits = build_translate_de_en(_fake_recipe(), [path])
    assert (len(first.train), len(first.dev), len(first.test)) == (8_500, 1_000, 1_000)
    assert first.task == "seq2seq" and first.input == "text"
    again = build_translate_de_en(_fake_recipe(), [path])
    assert [e.source for e in again.test] == [e.source for e in first.test]
    sources = [{e.source for e in split} for split in (first.train, first.dev, first.test)]
    assert sum(len(s) for s in sources) == len(set().union(*sources)) == 10_500
    assert [e.source for e in first.test[:3]] != [f"{path}:{i}" for i in (1, 2, 3)]  # shuffled


def test_a_truncated_dictionary_is_an_error(tmp_path: Path) -> None:
    path = _fake_dictionary(tmp_path / "de-en", 50)
    with pytest.raises(DataError, match="only 50 sentence pairs"):
        build_translate_de_en(_fake_recipe(), [path])
