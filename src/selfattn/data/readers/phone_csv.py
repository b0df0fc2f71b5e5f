"""A user's recordings with a phone label per frame: a ``path,phones`` CSV (token task).

The header row is ``path,phones``; each further row names a WAV (or FLAC) file and its
phone-label file, both relative to the CSV's folder (or absolute). A phone-label file
holds one label per line, line t for frame t: the 25 ms window of samples
``[t·10 ms, t·10 ms + 25 ms)`` at 16 kHz, so a recording of N samples at 16 kHz has
``1 + (N − 400) // 160`` frames (:func:`~selfattn.speech.features.num_frames`; a file at
another rate is resampled first) and its label file exactly that many lines::

    phones.csv          a.phn
    path,phones         sil
    a.wav,a.phn         sil
    b.wav,b.phn         D
                        @
                        …

Each recording becomes the frame vectors ``phones-espeak`` trains on (40 normalised
log-mels a frame, :func:`~selfattn.speech.frontend.speech_vectors` with ``stack = 1``), so
a model of either reads the other's files.
"""

from __future__ import annotations

from pathlib import Path

from selfattn.data.readers.wav_csv import has_header, row_samples, two_cell_rows
from selfattn.datatypes import DataError, Example

PHONE_CSV_HEADER = ("path", "phones")
#: The manifest's name inside a folder given as the training data.
PHONE_CSV_NAME = "phones.csv"


def is_phone_csv(path: Path) -> bool:
    """Whether ``path`` is a CSV whose header row is ``path,phones``."""
    return has_header(path, PHONE_CSV_HEADER)


def is_phone_folder(train: str | None) -> bool:
    """Whether a user's training file is a ``path,phones`` CSV (or a folder holding one)."""
    path = Path(train or "")
    manifest = path / PHONE_CSV_NAME if path.is_dir() else path
    return manifest.suffix.lower() == ".csv" and manifest.is_file() and is_phone_csv(manifest)


def read_phone_labels(path: Path) -> list[str]:
    """One label per line of ``path`` (surrounding spaces dropped).

    Raises:
        DataError: ``path:line: problem`` for an empty line (but trailing ones) or a line
            of several words; ``path: no phone labels`` for a file without any.
    """
    try:
        lines = path.read_text(encoding="utf-8-sig").splitlines()
    except (OSError, UnicodeDecodeError) as err:
        raise DataError(f"{path}: cannot read the phone labels ({err})") from None
    while lines and not lines[-1].strip():
        lines.pop()
    if not lines:
        raise DataError(f"{path}: no phone labels (one label a line, one line a frame)")
    labels = []
    for number, line in enumerate(lines, start=1):
        label = line.strip()
        if not label:
            raise DataError(f"{path}:{number}: empty phone label (one label a line)")
        if len(label.split()) > 1:
            raise DataError(f"{path}:{number}: one phone label a line, got {label!r}")
        labels.append(label)
    return labels


def read_phone_csv(path: Path) -> list[Example]:
    """A user's recordings and their frame labels, one ``audio,labels`` row each after
    the ``path,phones`` header.

    Returns:
        Token-task examples: ``features`` ``(F, 40)`` and a label per frame.

    Raises:
        DataError: ``path:line: problem`` for a row without two cells or with an empty
            one, a missing audio or label file, an unreadable recording, one shorter
            than one 25 ms frame, or a label file whose line count is not the
            recording's frame count (both counts named); a label file's own problems
            name its line (:func:`read_phone_labels`).
    """
    from selfattn.speech.features import SAMPLE_RATE, num_frames
    from selfattn.speech.frontend import speech_vectors

    examples = []
    for where, (audio_name, labels_name) in two_cell_rows(path, PHONE_CSV_HEADER):
        if not audio_name or not labels_name:
            raise DataError(f"{where}: empty {'path' if not audio_name else 'phones'} cell")
        audio, label_file = path.parent / audio_name, path.parent / labels_name
        if audio.is_file() and not label_file.is_file():
            raise DataError(f"{where}: no such phone-label file {label_file}")
        samples = row_samples(where, audio)
        frames = num_frames(len(samples), SAMPLE_RATE)
        if frames == 0:
            raise DataError(
                f"{where}: {audio} is too short: {1000 * len(samples) / SAMPLE_RATE:.1f} "
                "ms of audio, one frame needs 25 ms"
            )
        labels = read_phone_labels(label_file)
        if len(labels) != frames:
            raise DataError(
                f"{where}: {label_file} has {len(labels)} phone labels but {audio} has "
                f"{frames} frames (25 ms windows every 10 ms); give one label a frame"
            )
        features = speech_vectors(samples, SAMPLE_RATE, stack=1)
        examples.append(Example(None, features, tuple(labels), where))
    return examples
