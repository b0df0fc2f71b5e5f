"""A user's recordings with their transcripts: a CSV whose header is ``path,text``.

Each further row names one WAV or FLAC file (relative to the CSV's folder, or absolute)
and what is said in it, in free text (``He was not an ill-disposed young man.``). The
recordings are read whole, resampled to 16 kHz, for a model with a front end of its own
(a pretrained Whisper computes its log-mels from them): an example's ``features`` are
its ``(N, 1)`` float32 samples and its label the transcript's words.

A ``path,label`` CSV (:mod:`selfattn.data.readers.wav_csv`) is another thing: its labels
are classes or space-separated tokens, and its recordings become the recipes' speech
vectors.
"""

from __future__ import annotations

from pathlib import Path

from selfattn.data.readers.wav_csv import has_header, row_samples, two_cell_rows
from selfattn.datatypes import DataError, Example
from selfattn.speech.features import SAMPLE_RATE

__all__ = ["SPEECH_TEXT_HEADER", "is_speech_text_csv", "read_speech_text_csv"]

SPEECH_TEXT_HEADER = ("path", "text")
#: A recording whose loudest sample stays below this (−60 dBFS) holds no speech.
SILENCE_PEAK = 1e-3


def is_speech_text_csv(path: Path) -> bool:
    """Whether ``path`` is a CSV whose header row is ``path,text``."""
    return has_header(path, SPEECH_TEXT_HEADER)


def read_speech_text_csv(path: str | Path, *, max_seconds: float | None = None) -> list[Example]:
    """The recordings and transcripts of a ``path,text`` CSV, in file order.

    Args:
        path: the CSV file.
        max_seconds: refuse a recording longer than this (the model's window).

    Raises:
        DataError: ``path:line: problem`` for a header that is not ``path,text``, a row
            without two cells, an empty transcript, a missing or unreadable audio file, an
            empty or silent recording, or one longer than ``max_seconds``; a file without
            any row.
    """
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: no such file")
    if not is_speech_text_csv(path):
        raise DataError(f"{path}:1: the header must be path,text")
    examples = []
    for where, (audio, text) in two_cell_rows(path, SPEECH_TEXT_HEADER):
        if not audio:
            raise DataError(f"{where}: empty path")
        if not text:
            raise DataError(f"{where}: empty text")
        file = path.parent / audio
        samples = row_samples(where, file)
        seconds = samples.shape[0] / SAMPLE_RATE
        if float(abs(samples).max(initial=0.0)) < SILENCE_PEAK:
            raise DataError(f"{where}: {file} is silent (no sample above -60 dBFS)")
        if max_seconds is not None and seconds > max_seconds:
            raise DataError(
                f"{where}: {file} is {seconds:.1f} s long; the model reads at most "
                f"{max_seconds:g} s (cut it into shorter recordings)"
            )
        examples.append(Example(None, samples[:, None], tuple(text.split()), where))
    if not examples:
        raise DataError(f"{path}: no recordings after the path,text header")
    return examples
