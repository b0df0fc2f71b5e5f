"""English → Chinese sentence pairs from the HSK graded sentences (the course's homework
direction).

PyPI's ``hsk-sentences-audio`` wheel ships ``hsk_sentences_audio/data/sentences.json``
(CC-BY-SA-4.0): 4,354 Chinese sentences graded by HSK level (1–6), each a JSON object
with (among pinyin, glosses and audio URLs that are not used here)::

    {"id": "hsk1-0001", "hsk_level": 1, "chinese": "老师，您好！",
     "translation": {"en": "Hello, teacher!"},
     "tokens": [{"word": "老师", ...}, {"word": "您", ...}, {"word": "好", ...}], ...}

``tokens`` is the sentence's word segmentation, punctuation left out.
:func:`read_hsk_sentences` checks that layout and turns each entry into an
:class:`HskSentence`; two recipes read it, differing only in the Chinese target's units:

* ``translate-en-zh``: characters (``老 师 ， 您 好 ！``);
* ``translate-en-zh-words``: the shipped segmentation, punctuation as its own words
  (``老师 ， 您 好 ！``).

The English source is split by :func:`~selfattn.data.formats.text.tokenize`; the
configs learn one BPE vocabulary on both sides, which leaves a character target as
characters and cuts rare words of a segmented one into pieces. BLEU is scored with
sacrebleu's ``zh`` tokenisation (one token per Chinese character), so both targets are
scored alike.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from selfattn.data.batching.splits import shuffled
from selfattn.data.fetch.sources import wheel
from selfattn.data.formats.text import tokenize
from selfattn.data.registry import Recipe, register
from selfattn.datatypes import DataError, DatasetSplits, Example

Units = Literal["chars", "words"]

#: HSK levels of the 3.0 standard's elementary and intermediate bands found in the file.
LEVELS = range(1, 7)
#: Fraction of each level held out as test, and again as dev.
HELD_OUT = 0.1
#: The key under which a recipe's :class:`~selfattn.data.types.DatasetSplits` names the
#: sacrebleu tokenisation its BLEU is scored with.
BLEU_TOKENIZE = "bleu_tokenize"


@dataclass(frozen=True)
class HskSentence:
    """One checked entry of ``sentences.json``."""

    id: str
    level: int
    chinese: str
    english: str
    words: tuple[str, ...]  # the shipped segmentation, punctuation left out


def read_hsk_sentences(path: str | Path) -> list[HskSentence]:
    """Every entry of an HSK ``sentences.json``, in file order, checked.

    Raises:
        DataError: the file is not JSON, or not the HSK layout: the message names the
            entry's index (and id) and the field, e.g. ``entry 12 (hsk1-0013): field
            'chinese' is empty``.
    """
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as err:
        raise DataError(f"{path}: cannot read ({err.strerror or err})") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise DataError(f"{path}: not a JSON file ({err})") from None
    if not isinstance(data, list):
        raise DataError(
            f"{path}: not the HSK sentences layout: expected a JSON list of sentence "
            f"objects, got {type(data).__name__}"
        )
    return [_sentence(path, index, entry) for index, entry in enumerate(data)]


def _sentence(path: Path, index: int, entry: Any) -> HskSentence:
    where = f"{path}: entry {index}"
    if not isinstance(entry, dict):
        raise DataError(f"{where}: expected a JSON object, got {type(entry).__name__}")
    if isinstance(entry.get("id"), str):
        where += f" ({entry['id']})"

    def text(value: Any, field: str) -> str:
        if not isinstance(value, str):
            raise DataError(f"{where}: field {field!r} must be a string, got {value!r}")
        if not value.strip():
            raise DataError(f"{where}: field {field!r} is empty")
        return value.strip()

    level = entry.get("hsk_level")
    if not isinstance(level, int) or isinstance(level, bool) or level not in LEVELS:
        raise DataError(f"{where}: field 'hsk_level' must be 1 to 6, got {level!r}")
    translation = entry.get("translation")
    if not isinstance(translation, dict):
        raise DataError(f"{where}: field 'translation' must be an object with 'en'")
    chinese = text(entry.get("chinese"), "chinese")
    english = text(translation.get("en"), "translation.en")
    tokens = entry.get("tokens")
    if not isinstance(tokens, list) or not tokens:
        raise DataError(f"{where}: field 'tokens' must be a non-empty list of words")
    words = tuple(
        text(token.get("word") if isinstance(token, dict) else None, f"tokens[{i}].word")
        for i, token in enumerate(tokens)
    )
    return HskSentence(text(entry.get("id"), "id"), level, chinese, english, words)


def segment(sentence: HskSentence) -> list[str]:
    """The Chinese sentence as the shipped words, with each character between them that
    no word covers (punctuation) as a word of its own; spaces dropped.

    Raises:
        DataError: a word is not found in the sentence after the words before it.
    """
    chinese = sentence.chinese
    out: list[str] = []
    at = 0
    for i, word in enumerate(sentence.words):
        found = chinese.find(word, at)
        if found < 0:
            raise DataError(
                f"entry {sentence.id}: tokens[{i}].word {word!r} is not in the field "
                f"'chinese' ({chinese!r}) after the words before it"
            )
        out.extend(chinese[at:found])
        out.append(word)
        at = found + len(word)
    out.extend(chinese[at:])
    return [w.replace(" ", "") for w in out if not w.isspace()]


def characters(sentence: HskSentence) -> list[str]:
    """The Chinese sentence as characters, spaces dropped."""
    return [c for c in sentence.chinese if not c.isspace()]


def hsk_examples(
    sentences: list[HskSentence], units: Units, origin: str = "sentences.json"
) -> list[tuple[int, Example]]:
    """``(level, example)`` for each sentence, English source and Chinese target in
    ``units``; a pair identical to an earlier one (both sides) is dropped."""
    seen: set[tuple[tuple[str, ...], tuple[str, ...]]] = set()
    out = []
    for sentence in sentences:
        source = tuple(tokenize(sentence.english))
        try:
            target = tuple(characters(sentence) if units == "chars" else segment(sentence))
        except DataError as err:
            raise DataError(f"{origin}: {err}") from None
        if not source:
            raise DataError(f"{origin}: entry {sentence.id}: 'translation.en' holds no words")
        if (source, target) in seen:
            continue
        seen.add((source, target))
        out.append((sentence.level, Example(source, None, target, f"{origin}:{sentence.id}")))
    return out


def split_by_level(
    examples: list[tuple[int, Example]], seed: int = 0
) -> tuple[list[Example], list[Example], list[Example]]:
    """``(train, dev, test)``: of each level's examples, shuffled with ``seed``, the first
    10 % (rounded) go to test, the next 10 % to dev, the rest to train; each split keeps
    the file order."""
    by_level: dict[int, list[int]] = defaultdict(list)
    for i, (level, _) in enumerate(examples):
        by_level[level].append(i)
    test: set[int] = set()
    dev: set[int] = set()
    for level in sorted(by_level):
        order = shuffled(by_level[level], seed=seed + level)
        n = round(len(order) * HELD_OUT)
        test.update(order[:n])
        dev.update(order[n : 2 * n])
    parts: tuple[list[Example], list[Example], list[Example]] = ([], [], [])
    for i, (_, example) in enumerate(examples):
        parts[2 if i in test else 1 if i in dev else 0].append(example)
    return parts


def _builder(units: Units) -> Any:
    def build(recipe: Recipe, paths: list[Path]) -> DatasetSplits:
        sentences = read_hsk_sentences(paths[0])
        if len(sentences) < 4_000:
            raise DataError(f"{paths[0]}: only {len(sentences)} sentences, expected 4,354")
        splits = recipe.splits(*split_by_level(hsk_examples(sentences, units, str(paths[0]))))
        splits.extra[BLEU_TOKENIZE] = "zh"
        return splits

    return build


HSK_SOURCE = wheel(
    "hsk-sentences-audio==1.0.0",
    # The wheel's digest as PyPI's index lists it; the downloaded file was checked too.
    "9bf16cc7b48a24a10af83d377439d3c6f7571a380937f4645a1cd1590d5d0335",
    "hsk_sentences_audio/data",
    ("sentences.json",),
    download_mb=0.88,
)
HSK_LICENCE = (
    "CC-BY-SA-4.0 (the dataset of hsk-sentences-audio, by the hsk-sentences-audio "
    "contributors, github.com/no7z/hsk-sentences-audio)"
)
_SPLIT = (
    "Split by level (seed 0): 10 % of each HSK level test, 10 % dev, the rest train "
    "(3,482 / 435 / 435 pairs). BLEU with sacrebleu's zh tokenisation."
)

_DESCRIPTIONS: dict[Units, tuple[str, str]] = {
    "chars": (
        "translate-en-zh",
        "English → Chinese: 4,354 graded sentences of HSK levels 1-6 (hsk-sentences-audio), "
        "4,352 after dropping exact duplicates; the Chinese target as characters. ",
    ),
    "words": (
        "translate-en-zh-words",
        "translate-en-zh with the Chinese target as the dataset's word segmentation "
        "(punctuation as words of its own). ",
    ),
}

register(
    *(
        Recipe(
            name=name,
            task="seq2seq",
            input="text",
            description=description + _SPLIT,
            source=HSK_SOURCE,
            licence=HSK_LICENCE,
            build=_builder(units),
        )
        for units, (name, description) in _DESCRIPTIONS.items()
    )
)
