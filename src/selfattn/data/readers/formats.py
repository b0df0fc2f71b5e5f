"""Readers for the file formats a user (or a recipe) hands to selfattn.

Every reader returns ``list[Example]`` and turns malformed input into a one-line
:class:`DataError` of the form ``path:line: problem``. Blank lines are the only thing ever
skipped silently.

=================  ========  =======================================================
reader             task      layout
=================  ========  =======================================================
``read_tagged``    token     one sentence a line, ``word/TAG`` tokens split by spaces
``read_conllu``    token     CoNLL-U; UPOS (or XPOS) per word
``read_classif…``  sequence  ``label,text`` CSV (or TSV), optional header, BOM ok
``read_npz``       either    raw vector sets: ``features``, ``lengths``, ``labels``
``read_ts``        sequence  sktime / UEA ``.ts`` multivariate time series
``read_parallel``  seq2seq   ``source<TAB>target`` lines (parallel text)
=================  ========  =======================================================
"""

from __future__ import annotations

import csv
import io
import itertools
import math
import re
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Literal

import numpy as np
from conllu.exceptions import ParseException
from conllu.parser import DEFAULT_FIELDS, parse_line

from selfattn.data.types import DataError, Example, TaskType

_WORD_RE = re.compile(
    r"\d+(?:[.,]\d+)*"  # numbers: 42, 3.5, 1,000
    r"|\w+(?:['’-]\w+)*"  # words, with inner apostrophes and hyphens: it's, after-effects
    r"|[^\w\s]"  # any other visible character is punctuation, one token each
)


#: The largest float32; a number beyond it (``1e39``) becomes inf when a model reads it.
FLOAT32_MAX = float(np.finfo(np.float32).max)
#: How a refusal states the range: ``±3.4e+38``.
FLOAT32_RANGE = f"±{FLOAT32_MAX:.2g}"


def as_float32(values: np.ndarray) -> np.ndarray:
    """``values`` as float32, a number beyond its range becoming ±inf without NumPy's
    overflow warning (the caller refuses it in one line)."""
    with np.errstate(over="ignore"):
        return values.astype(np.float32, copy=False)


def float32_or_none(text: str) -> float | None:
    """``text`` as a number a float32 holds finitely, else ``None`` (nan, ±inf, 1e39).

    Raises:
        ValueError: ``text`` is not a number.
    """
    value = float(text)
    return value if abs(value) <= FLOAT32_MAX else None  # nan compares false


def tokenize(text: str) -> list[str]:
    """Split raw text into words, numbers and punctuation (case is kept)."""
    return _WORD_RE.findall(text)


def _read_text(path: Path) -> str:
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


def _lines(path: Path) -> Iterator[tuple[int, str]]:
    """``(line number, line without its newline)`` for every line of a UTF-8 file."""
    # split("\n"), not splitlines(): the latter also breaks at \x0b, \x1c, U+2028 …,
    # which would make the line numbers disagree with the user's editor.
    for lineno, line in enumerate(_read_text(path).split("\n"), start=1):
        yield lineno, line.rstrip("\r")


# --------------------------------------------------------------------------- tagged text


def read_tagged(path: str | Path) -> list[Example]:
    """Read ``word/TAG word/TAG …`` lines, one sentence per line (token task).

    The tag is what follows the *last* ``/``, so ``1/2/CD`` is the word ``1/2``.
    """
    path = Path(path)
    examples = []
    for lineno, line in _lines(path):
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

    for lineno, line in _lines(path):
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
    reader = csv.reader(io.StringIO(_read_text(path), newline=""), delimiter=delimiter, strict=True)
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
    for lineno, line in _lines(path):
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


# --------------------------------------------------------------------------- vector sets


def read_npz(path: str | Path) -> list[Example]:
    """Read raw vector sets (any modality) from a NumPy ``.npz`` file.

    Layout — N sets holding ``N_total`` vectors of F numbers in all:

    * ``features``: ``(N_total, F)`` float, the sets one after another;
    * ``lengths``: ``(N,)`` int ≥ 1, the size of each set, summing to ``N_total``;
    * ``labels``: ``(N,)`` one label per set (sequence task) or ``(N_total,)`` one per
      vector (token task); strings or integers (kept as their decimal string);
    * ``task`` (optional): the string ``"token"`` or ``"sequence"``, needed only when
      ``N == N_total`` makes the labels' shape ambiguous (default: sequence).

    Saved e.g. with ``np.savez(path, features=X, lengths=lens, labels=y)``.
    """
    path = Path(path)
    arrays = npz_arrays(path)

    def need(key: str) -> np.ndarray:
        if key not in arrays:
            have = ", ".join(sorted(arrays)) or "none"
            raise DataError(f"{path}: missing array {key!r} (arrays present: {have})")
        return arrays[key]

    features, lengths, labels = need("features"), need("lengths"), need("labels")
    if features.ndim != 2 or not np.issubdtype(features.dtype, np.number):
        raise DataError(
            f"{path}: 'features' must be a numeric (N_total, F) array, got "
            f"{features.dtype} {features.shape}"
        )
    floats = as_float32(features)
    if not np.isfinite(floats).all():  # nan, ±inf, or beyond float32 (inf once cast)
        row = int(np.argwhere(~np.isfinite(floats))[0, 0])
        raise DataError(
            f"{path}: 'features' row {row} holds NaN or inf (or a number beyond {FLOAT32_RANGE})"
        )
    if lengths.ndim != 1 or not np.issubdtype(lengths.dtype, np.integer):
        raise DataError(f"{path}: 'lengths' must be a 1-D integer array, got {lengths.shape}")
    if (lengths < 1).any():
        bad = int(np.argmax(lengths < 1))
        raise DataError(f"{path}: set {bad} has length {int(lengths[bad])}, need at least 1")
    total = int(lengths.sum())
    if total != features.shape[0]:
        raise DataError(
            f"{path}: 'lengths' sum to {total} but 'features' has {features.shape[0]} rows"
        )
    task = _npz_task(path, arrays.get("task"), labels, len(lengths), total)
    label_strings = [str(x) for x in labels.tolist()]

    examples = []
    offsets = [0, *np.cumsum(lengths).tolist()]
    for i, (lo, hi) in enumerate(itertools.pairwise(offsets)):
        label: tuple[str, ...] | str = (
            tuple(label_strings[lo:hi]) if task == "token" else label_strings[i]
        )
        examples.append(Example(None, floats[lo:hi], label, f"{path}[{i}]"))
    return examples


def npz_arrays(path: Path) -> dict[str, np.ndarray]:
    """The arrays of an ``.npz`` file by name, loaded without its pickles.

    Raises:
        DataError: one line naming the file: missing, unreadable, not an ``.npz`` archive,
            or an array that is damaged or holds Python objects.
    """
    if not path.is_file():
        raise DataError(f"{path}: no such file")
    plain = "a NumPy .npz archive of plain arrays, as np.savez writes"
    try:
        loaded = np.load(path, allow_pickle=False)
    except OSError as err:
        raise DataError(f"{path}: cannot read ({err.strerror or err})") from None
    except (ValueError, EOFError, zipfile.BadZipFile):
        # NumPy's own message here suggests allow_pickle: never load a file's pickles.
        raise DataError(f"{path}: not a valid .npz file (expected {plain})") from None
    if not isinstance(loaded, np.lib.npyio.NpzFile):
        raise DataError(f"{path}: a single .npy array, not an .npz archive (expected {plain})")
    arrays = {}
    with loaded:
        archive = loaded.zip
        assert archive is not None  # an open NpzFile's
        for info in archive.infolist():
            _check_declared_size(path, archive, info, plain)
        for key in loaded.files:
            try:
                arrays[key] = loaded[key]
            except ValueError:
                raise DataError(
                    f"{path}: array {key!r} holds Python objects (dtype=object); save "
                    "numbers or strings (a list of sets: concatenate them and give 'lengths')"
                ) from None
            except (OSError, EOFError, zipfile.BadZipFile):
                raise DataError(f"{path}: array {key!r} is damaged (expected {plain})") from None
    return arrays


def _check_declared_size(
    path: Path, archive: zipfile.ZipFile, info: zipfile.ZipInfo, plain: str
) -> None:
    """Refuse an archive member whose ``.npy`` header declares more bytes than the member
    holds, before NumPy allocates what it declares (a 300-byte file can declare 10 TiB)."""
    key = info.filename.removesuffix(".npy")
    try:
        with archive.open(info) as handle:
            version = np.lib.format.read_magic(handle)
            read_header = (
                np.lib.format.read_array_header_1_0
                if version == (1, 0)
                else np.lib.format.read_array_header_2_0
            )
            shape, _, dtype = read_header(handle)
            held = info.file_size - handle.tell()
    except (ValueError, OSError, EOFError, zipfile.BadZipFile, SyntaxError, TypeError):
        raise DataError(f"{path}: array {key!r} is damaged (expected {plain})") from None
    if any(n < 0 for n in shape):
        raise DataError(f"{path}: array {key!r} declares shape {shape} (expected {plain})")
    declared = math.prod(shape) * dtype.itemsize
    if not dtype.hasobject and declared > held:
        raise DataError(
            f"{path}: array {key!r} declares shape {shape} of {dtype} ({declared:,} bytes) "
            f"but holds {held:,} bytes"
        )


def _npz_task(
    path: Path, task_array: np.ndarray | None, labels: np.ndarray, num_sets: int, total: int
) -> TaskType:
    if labels.ndim != 1 or labels.dtype.kind not in "iuU":
        raise DataError(
            f"{path}: 'labels' must be a 1-D array of strings or integers, got "
            f"{labels.dtype} {labels.shape}"
        )
    if task_array is not None:
        task = str(task_array)
        if task not in ("token", "sequence"):
            raise DataError(f"{path}: 'task' must be 'token' or 'sequence', got {task!r}")
        expected = total if task == "token" else num_sets
        if labels.shape[0] != expected:
            raise DataError(
                f"{path}: task {task!r} needs {expected} labels, 'labels' has {labels.shape[0]}"
            )
        return "token" if task == "token" else "sequence"
    if labels.shape[0] == num_sets:
        return "sequence"
    if labels.shape[0] == total:
        return "token"
    raise DataError(
        f"{path}: 'labels' has {labels.shape[0]} entries; expected {num_sets} (one per set) "
        f"or {total} (one per vector)"
    )


# --------------------------------------------------------------------------- sktime .ts


def read_ts(path: str | Path) -> list[Example]:
    """Read a (multivariate) sktime / UEA ``.ts`` file with class labels (sequence task).

    After ``@data`` each line is one case: dimensions separated by ``:``, the values of a
    dimension by ``,``, the class label last. Each case becomes features of shape
    ``(L, num_dims)`` float32. Time stamps and missing values (``?``) are not supported.
    """
    path = Path(path)
    examples = []
    in_data = False
    num_dims: int | None = None
    for lineno, raw in _lines(path):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if not in_data:
            num_dims, in_data = _ts_header(path, lineno, line, num_dims)
            continue
        features, label = _ts_case(path, lineno, line)
        if num_dims is not None and features.shape[1] != num_dims:
            raise DataError(
                f"{path}:{lineno}: {features.shape[1]} dimensions, the file declares {num_dims}"
            )
        num_dims = features.shape[1]
        examples.append(Example(None, features, label, f"{path}:{lineno}"))
    if not in_data:
        raise DataError(f"{path}: no @data line; is this a .ts file?")
    return examples


def _ts_header(path: Path, lineno: int, line: str, num_dims: int | None) -> tuple[int | None, bool]:
    """Interpret one ``@key value`` header line: ``(declared dimensions, reached @data)``."""
    if not line.startswith("@"):
        raise DataError(f"{path}:{lineno}: expected an @header line or @data before the data")
    key, _, value = line[1:].partition(" ")
    key, value = key.lower(), value.strip().lower()
    if key == "data":
        return num_dims, True
    if key == "timestamps" and value == "true":
        raise DataError(f"{path}:{lineno}: time-stamped .ts files are not supported")
    if key == "classlabel" and value.startswith("false"):
        raise DataError(f"{path}:{lineno}: the file has no class labels to learn")
    if key == "dimensions":
        try:
            return int(value), False
        except ValueError:
            raise DataError(f"{path}:{lineno}: @dimensions {value!r} is not a number") from None
    return num_dims, False


def _ts_case(path: Path, lineno: int, line: str) -> tuple[np.ndarray, str]:
    *dims, label = line.split(":")
    label = label.strip()
    if not dims or not label:
        raise DataError(f"{path}:{lineno}: expected dimensions separated by ':' then a label")
    series = []
    for d, text in enumerate(dims):
        if "?" in text:
            raise DataError(f"{path}:{lineno}: dimension {d} has missing values ('?')")
        try:
            values = [float32_or_none(v) for v in text.split(",")]
        except ValueError:
            raise DataError(f"{path}:{lineno}: dimension {d} holds a non-number") from None
        if None in values:
            bad = text.split(",")[values.index(None)].strip()
            raise DataError(
                f"{path}:{lineno}: dimension {d} holds {bad}, not a finite number within "
                f"{FLOAT32_RANGE}"
            )
        series.append(values)
    lengths = {len(s) for s in series}
    if len(lengths) != 1:
        raise DataError(f"{path}:{lineno}: dimensions differ in length ({sorted(lengths)})")
    # (num_dims, L) as written → (L, num_dims): one vector per time step.
    return np.asarray(series, dtype=np.float32).T.copy(), label
