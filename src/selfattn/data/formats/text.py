"""Readers for the text formats a user (or a recipe) hands to selfattn, and the tokenizer.

Every reader returns ``list[Example]`` and turns malformed input into a one-line
:class:`DataError` of the form ``path:line: problem``. Blank lines are the only thing ever
skipped silently. The numeric formats (``.npz`` vector sets, ``.ts`` time series) are in
:mod:`~selfattn.data.formats.numeric`.

=================  ========  =======================================================
reader             task      layout
=================  ========  =======================================================
``read_tagged``    token     one sentence a line, ``word/TAG`` tokens split by spaces
``read_conllu``    token     CoNLL-U; UPOS (or XPOS) per word
``read_classif…``  sequence  ``label,text`` CSV (or TSV), optional header, BOM ok
``read_parallel``  seq2seq   ``source<TAB>target`` lines (parallel text)
=================  ========  =======================================================
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Literal

from conllu.exceptions import ParseException
from conllu.parser import DEFAULT_FIELDS, parse_line

from selfattn.datatypes import DataError, Example

_WORD_RE = re.compile(
    r"\d+(?:[.,]\d+)*"  # numbers: 42, 3.5, 1,000
    r"|\w+(?:['’-]\w+)*"  # words, with inner apostrophes and hyphens: it's, after-effects
    r"|[^\w\s]"  # any other visible character is punctuation, one token each
)


def tokenize(text: str) -> list[str]:
    """Split raw text into words, numbers and punctuation (case is kept)."""
    return _WORD_RE.findall(text)


def read_text(path: Path) -> str:
    """The whole file as UTF-8 text (a BOM is dropped); bad bytes name their line."""
    try:
        data = path.read_bytes()
    except OSError as err:
        raise DataError(f"{path}: cannot read ({err.strerror or err})") from None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        lineno = data[: err.start].count(b"\n") + 1
        raise DataError(f"{path}:{lineno}: not valid UTF-8 text ({err.reason})") from None


def numbered_lines(path: Path) -> Iterator[tuple[int, str]]:
    """``(line number, line without its newline)`` for every line of a UTF-8 file."""
    # split("\n"), not splitlines(): the latter also breaks at \x0b, \x1c, U+2028 …,
    # which would make the line numbers disagree with the user's editor.
    for lineno, line in enumerate(read_text(path).split("\n"), start=1):
        yield lineno, line.rstrip("\r")


# --------------------------------------------------------------------------- tagged text


def read_tagged(path: str | Path) -> list[Example]:
    """Read ``word/TAG word/TAG …`` lines, one sentence per line (token task).

    The tag is what follows the *last* ``/``, so ``1/2/CD`` is the word ``1/2``.
    """
    path = Path(path)
    examples = []
    for lineno, line in numbered_lines(path):
        if not line.strip():
            continue
        words, tags = [], []
        for token in line.split():
            word, sep, tag = token.rpartition("/")
            if not sep or not word or not tag:
                raise DataError(f"{path}:{lineno}: token {token!r} is not word/TAG")
            words.append(word)
            tags.append(tag)
        examples.append(Example(tuple(words), None, tuple(tags), f"{path}:{lineno}"))
    return examples


# --------------------------------------------------------------------------- CoNLL-U

_CONLLU_COLUMNS = 10


def read_conllu(path: str | Path, *, tag: Literal["upos", "xpos"] = "upos") -> list[Example]:
    """Read a CoNLL-U file: one example per sentence, labels are the UPOS (or XPOS) tags.

    Multiword-token lines (``3-4``) and empty nodes (``5.1``) are skipped: the words they
    cover carry the tags. Each token line is parsed by the ``conllu`` package.
    """
    path = Path(path)
    examples: list[Example] = []
    words: list[str] = []
    tags: list[str] = []
    start = 0  # first line of the current sentence block (comments included)

    def finish() -> None:
        if words:
            examples.append(Example(tuple(words), None, tuple(tags), f"{path}:{start}"))
        words.clear()
        tags.clear()

    for lineno, line in numbered_lines(path):
        if not line.strip():
            finish()
            start = 0
            continue
        start = start or lineno
        if line.startswith("#"):
            continue
        word, label = _conllu_token(path, lineno, line, tag)
        if word is not None:
            words.append(word)
            tags.append(label)
    finish()
    return examples


def _conllu_token(path: Path, lineno: int, line: str, tag: str) -> tuple[str | None, str]:
    """``(form, tag)`` of one token line, or ``(None, "")`` for multiword / empty nodes."""
    columns = line.split("\t")
    if len(columns) != _CONLLU_COLUMNS:
        raise DataError(
            f"{path}:{lineno}: expected {_CONLLU_COLUMNS} tab-separated columns, got {len(columns)}"
        )
    try:
        token = parse_line(line, fields=DEFAULT_FIELDS)
    except ParseException as err:
        raise DataError(f"{path}:{lineno}: {err}") from None
    if not isinstance(token["id"], int):
        return None, ""
    form, label = token["form"], token[tag]
    if not form:
        raise DataError(f"{path}:{lineno}: empty FORM")
    if not label or label == "_":
        raise DataError(f"{path}:{lineno}: no {tag.upper()} tag for {form!r}")
    return form, label


# --------------------------------------------------------------------------- label,text


def read_classification_csv(path: str | Path, delimiter: str | None = None) -> list[Example]:
    """Read ``label,text`` rows (sequence task); the text is split by :func:`tokenize`.

    Args:
        path: a ``.csv`` (comma) or ``.tsv`` (tab) file; UTF-8, with or without a BOM. A
            first row of exactly ``label,text`` is a header and is skipped. Quote texts
            that contain the delimiter.
        delimiter: overrides the choice made from the extension.
    """
    path = Path(path)
    if delimiter is None:
        delimiter = "\t" if path.suffix.lower() == ".tsv" else ","
    examples = []
    reader = csv.reader(io.StringIO(read_text(path), newline=""), delimiter=delimiter, strict=True)
    end = 0
    try:
        for row in reader:
            # A quoted field can span lines: report the line where the record starts.
            lineno, end = end + 1, reader.line_num
            if not row or (len(row) == 1 and not row[0].strip()):
                continue
            if lineno == 1 and [c.strip() for c in row] == ["label", "text"]:
                continue
            examples.append(_classification_row(path, lineno, row, delimiter))
    except csv.Error as err:
        start = end + 1  # the line where the failing record began
        if reader.line_num > start:
            # A quote opened on line `start` swallowed the lines after it: point there.
            raise DataError(
                f"{path}:{start}: a quoted field opened on this line is not closed properly "
                f"(the CSV reader fails at line {reader.line_num}: {err}); close the quote, "
                "or double a quote inside a quoted text"
            ) from None
        raise DataError(f"{path}:{reader.line_num}: {err}") from None
    return examples


def _classification_row(path: Path, lineno: int, row: list[str], delimiter: str) -> Example:
    if len(row) != 2:
        shown = "tab" if delimiter == "\t" else repr(delimiter)
        raise DataError(
            f"{path}:{lineno}: expected 2 fields (label, text) separated by {shown}, got "
            f"{len(row)}; quote a text that contains the delimiter"
        )
    label, text = row[0].strip(), row[1]
    if not label:
        raise DataError(f"{path}:{lineno}: empty label")
    tokens = tokenize(text)
    if not tokens:
        raise DataError(f"{path}:{lineno}: empty text")
    return Example(tuple(tokens), None, label, f"{path}:{lineno}")


# --------------------------------------------------------------------------- parallel text


def read_parallel(path: str | Path) -> list[Example]:
    """Read ``source<TAB>target`` lines (seq2seq task), e.g. a sentence and its translation.

    Each side is split by :func:`tokenize`: ``tokens`` holds the source, ``label`` the
    target tokens. No quoting: a line must hold exactly one tab. Blank lines are skipped.
    """
    path = Path(path)
    examples = []
    for lineno, line in numbered_lines(path):
        if not line.strip():
            continue
        fields = line.split("\t")
        if len(fields) != 2:
            raise DataError(
                f"{path}:{lineno}: expected source<TAB>target (exactly one tab), got "
                f"{len(fields) - 1} tabs"
            )
        source, target = (tokenize(field) for field in fields)
        for side, tokens in (("source", source), ("target", target)):
            if not tokens:
                raise DataError(f"{path}:{lineno}: empty {side} side")
        examples.append(Example(tuple(source), None, tuple(target), f"{path}:{lineno}"))
    return examples
