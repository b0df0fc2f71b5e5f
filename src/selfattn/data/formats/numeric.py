"""Readers for the numeric formats a user (or a recipe) hands to selfattn, and the float32
checks every reader of numbers shares.

Every reader returns ``list[Example]`` and turns malformed input into a one-line
:class:`DataError` naming the file (and the line or set). The text formats are in
:mod:`~selfattn.data.formats.text`.

=================  ========  =======================================================
reader             task      layout
=================  ========  =======================================================
``read_npz``       either    raw vector sets: ``features``, ``lengths``, ``labels``
``read_ts``        sequence  sktime / UEA ``.ts`` multivariate time series
=================  ========  =======================================================
"""

from __future__ import annotations

import itertools
import math
import zipfile
from pathlib import Path

import numpy as np

from selfattn.data.formats.text import numbered_lines
from selfattn.datatypes import DataError, Example, TaskType

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
    for lineno, raw in numbered_lines(path):
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
