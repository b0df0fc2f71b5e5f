"""A user's own recordings: a CSV of WAV files and their labels.

The header row is ``path,label``; each further row names one WAV file (relative to the
CSV's folder, or absolute) and its label. Each recording goes through the same front end
as the spoken-digit recipes (:func:`~selfattn.speech.frontend.speech_vectors`), so a
model trained on ``digits-espeak`` and one trained on a user's folder read the same
vectors.
"""

from __future__ import annotations

import csv
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from selfattn.datatypes import DataError, Example

WAV_CSV_HEADER = ("path", "label")


def is_wav_csv(path: Path) -> bool:
    """Whether ``path`` is a CSV whose header row is ``path,label``."""
    return has_header(path, WAV_CSV_HEADER)


def has_header(path: Path, header: tuple[str, ...]) -> bool:
    """Whether ``path`` is a CSV whose first row is ``header`` (any case, spaces stripped)."""
    try:
        with path.open(encoding="utf-8-sig", newline="") as handle:
            first = next(csv.reader(handle), [])
    except (OSError, UnicodeDecodeError, csv.Error):
        return False  # not ours: the other CSV readers say what is wrong with it
    return tuple(cell.strip().lower() for cell in first) == header


def read_wav_csv(path: Path, *, seq2seq: bool = False) -> list[Example]:
    """A user's recordings: one ``WAV-path,label`` row each after the ``path,label`` header.

    Paths are relative to the CSV's folder (or absolute). Each file becomes
    :func:`~selfattn.speech.frontend.speech_vectors` vectors; the label is one class
    (sequence task) or, with ``seq2seq``, the space-separated target tokens (``3 5 1``).

    Raises:
        DataError: ``path:line: problem`` for a row without two cells, an empty label, a
            missing or unreadable WAV file, or a recording shorter than one vector.
    """
    from selfattn.data.readers.audio import speech_vectors_file

    examples = []
    for where, (wav, label) in two_cell_rows(path, WAV_CSV_HEADER):
        if not label:
            raise DataError(f"{where}: empty label")
        file = path.parent / wav
        if not file.is_file():
            raise DataError(f"{where}: no such WAV file {file}")
        try:
            features = speech_vectors_file(file)
        except DataError as err:
            raise DataError(f"{where}: {err}") from None
        if len(features) == 0:
            raise DataError(f"{where}: {file} is too short (under 45 ms)")
        target: tuple[str, ...] | str = tuple(label.split()) if seq2seq else label
        examples.append(Example(None, features, target, where))
    return examples


def row_samples(where: str, file: Path) -> np.ndarray:
    """The 16 kHz samples of the audio file a CSV row names (``where``: ``path:line``).

    Raises:
        DataError: ``where: problem`` for a missing or unreadable file.
    """
    from selfattn.data.readers.audio import read_audio
    from selfattn.speech.features import SAMPLE_RATE

    if not file.is_file():
        raise DataError(f"{where}: no such audio file {file}")
    try:
        samples, _ = read_audio(file, sample_rate=SAMPLE_RATE)
    except DataError as err:
        raise DataError(f"{where}: {err}") from None
    return samples


def two_cell_rows(path: Path, header: tuple[str, str]) -> Iterator[tuple[str, tuple[str, str]]]:
    """The ``(path:line, (first, second))`` rows of a two-column CSV after its header row,
    cells stripped, blank rows skipped.

    Raises:
        DataError: ``path:line: problem`` for a row without two cells (naming ``header``).
    """
    with path.open(encoding="utf-8-sig", newline="") as handle:
        for line, row in enumerate(csv.reader(handle), start=1):
            if line == 1 or not any(cell.strip() for cell in row):
                continue
            where = f"{path}:{line}"
            if len(row) != 2:
                raise DataError(f"{where}: expected 2 cells ({','.join(header)}), got {len(row)}")
            yield where, (row[0].strip(), row[1].strip())
