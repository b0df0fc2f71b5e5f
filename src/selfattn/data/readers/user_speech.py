"""A user's recording read as the speech recipes' training examples were: WAV or FLAC at
any rate, resampled to 16 kHz, through the recipes' front end
(:func:`~selfattn.speech.frontend.speech_vectors`).

The checkpoint records the front end's settings (:func:`speech_settings`), so that a model
trained with other settings is refused rather than fed vectors it never saw.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from selfattn.data.readers.audio import read_audio
from selfattn.data.readers.user_description import InputDescription, check_width
from selfattn.data.readers.wav_csv import is_wav_csv
from selfattn.datatypes import DataError, Example
from selfattn.specials import NO_LABEL
from selfattn.speech.features import SAMPLE_RATE, num_frames
from selfattn.speech.frontend import N_MELS, STACK, speech_vectors

#: Frames per vector the front end makes: the recipes' 30 ms vectors, or every 10 ms frame
#: (frame-level labels: ``phones-espeak``, a user's ``path,phones`` CSV).
STACKS = (STACK, 1)


def speech_settings(stack: int = STACK) -> dict[str, Any]:
    """The front end's settings as a checkpoint stores them (and compares them)."""
    return {"sample_rate": SAMPLE_RATE, "n_mels": N_MELS, "stack": stack}


def is_wav_folder(train: str | None) -> bool:
    """Whether a user's training file is a ``path,label`` CSV of WAV files (or its folder)."""
    path = Path(train or "")
    csv = path / "labels.csv" if path.is_dir() else path
    return csv.suffix.lower() == ".csv" and csv.is_file() and is_wav_csv(csv)


def read_speech(path: Path, description: InputDescription, source: str) -> Example:
    """The recipes' front end on the file's samples at 16 kHz; another rate is resampled
    first, as a user's training WAVs are
    (:func:`~selfattn.data.readers.audio.speech_vectors_file`).

    Returns:
        An unlabelled example of ``features`` ``(L, stack · N_MELS)`` float32 (the
        description's ``stack``).

    Raises:
        DataError: not a WAV or FLAC file, no samples, under one vector (45 ms; 25 ms
            for a frame-level model), or vectors of another
            width than the model reads.
    """
    try:
        samples, _ = read_audio(path, sample_rate=SAMPLE_RATE)
    except FileNotFoundError as err:
        raise DataError(str(err)) from None
    stack = description.stack
    if num_frames(len(samples), SAMPLE_RATE) < stack:
        needed = 25 + 10 * (stack - 1)  # one 25 ms window, then 10 ms a further frame
        raise DataError(f"{path}: too short: one speech vector needs {needed} ms of audio")
    vectors = speech_vectors(samples, SAMPLE_RATE, stack=stack)
    check_width(path, vectors, description)
    return Example(None, vectors, NO_LABEL, source)
