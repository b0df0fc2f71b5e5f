"""Audio files read as samples: WAV and FLAC through libsndfile (``soundfile``), refused in
one line that starts with the path when a file is not one, and the speech front end
(:mod:`selfattn.speech`) applied to a file.

Reading files and naming what is wrong with them is the data layer's job; the signal
processing below it (:mod:`selfattn.speech`) works on samples only, so it needs nothing of
the data package.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import numpy as np
import soundfile
from torch import Tensor

from selfattn.data.types import DataError
from selfattn.speech.features import SAMPLE_RATE, log_mel, resample
from selfattn.speech.frontend import STACK, speech_vectors

__all__ = [
    "AUDIO_FORMATS",
    "log_mel_file",
    "read_audio",
    "read_wav",
    "speech_vectors_file",
]

AudioFormat = Literal["WAV", "FLAC"]


#: libsndfile's names of the containers read, by the name messages give them: RIFF/WAVE
#: (WAVEX: WAVE_FORMAT_EXTENSIBLE; RF64: WAVE past 4 GB) and FLAC.
AUDIO_FORMATS: dict[AudioFormat, frozenset[str]] = {
    "WAV": frozenset({"WAV", "WAVEX", "RF64"}),
    "FLAC": frozenset({"FLAC"}),
}


def read_audio(
    path: str | Path,
    *,
    sample_rate: int | None = None,
    formats: tuple[AudioFormat, ...] = ("WAV", "FLAC"),
) -> tuple[np.ndarray, int]:
    """Read a WAV or FLAC file as mono float samples in [-1, 1].

    Any PCM or float WAV libsndfile reads (8/16/24/32-bit integer, 32/64-bit float,
    WAVE_FORMAT_EXTENSIBLE) and any FLAC is accepted, whatever the file's suffix says;
    channels are averaged into one.

    Args:
        path: the audio file.
        sample_rate: resample to this rate (e.g.
            :data:`~selfattn.speech.features.SAMPLE_RATE`); ``None`` keeps the file's own
            rate.
        formats: the containers accepted (:data:`AUDIO_FORMATS`); another is refused.

    Returns:
        ``(samples (N,) float32, sample_rate)``.

    Raises:
        FileNotFoundError: no such file.
        DataError: a directory, a file of another format, or one with no samples; the
            one-line message starts with the path.
    """
    path = Path(path)
    wanted = " or ".join(formats)  # "WAV or FLAC"
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such file")
    if not path.is_file():
        raise DataError(f"{path}: not a file")
    if path.stat().st_size == 0:
        raise DataError(f"{path}: empty file (0 bytes), not a {wanted} file")
    try:
        info = soundfile.info(str(path))
    except soundfile.SoundFileError as error:
        reason = getattr(error, "error_string", "") or str(error)
        raise DataError(f"{path}: not a {wanted} file ({reason.strip().rstrip('.')})") from error
    found = [name for name in formats if info.format in AUDIO_FORMATS[name]]
    if not found:
        raise DataError(f"{path}: not a {wanted} file (it is {info.format_info})")
    if info.frames == 0:
        raise DataError(f"{path}: empty {found[0]} file (no samples)")
    data, rate = soundfile.read(str(path), dtype="float32", always_2d=True)  # (N, channels)
    samples = data.mean(axis=1, dtype=np.float32) if data.shape[1] > 1 else data[:, 0]
    if sample_rate is not None and sample_rate != rate:
        return resample(samples, rate, sample_rate), sample_rate
    return np.ascontiguousarray(samples), int(rate)


def read_wav(path: str | Path, *, sample_rate: int | None = None) -> tuple[np.ndarray, int]:
    """:func:`read_audio` of a WAV file only (what a user's training CSV lists): a FLAC
    file is refused, ``not a WAV file (it is FLAC …)``."""
    return read_audio(path, sample_rate=sample_rate, formats=("WAV",))


def log_mel_file(
    path: str | Path,
    *,
    sample_rate: int | None = SAMPLE_RATE,
    n_mels: int = 80,
    window_ms: float = 25.0,
    hop_ms: float = 10.0,
) -> Tensor:
    """:func:`read_wav` then :func:`~selfattn.speech.features.log_mel`: a WAV file as
    ``(F, n_mels)`` vectors.

    Args:
        path: the ``.wav`` file.
        sample_rate: resample to this rate first (16 kHz by default); ``None`` keeps the
            file's rate.
        n_mels, window_ms, hop_ms: as in :func:`~selfattn.speech.features.log_mel`.
    """
    samples, rate = read_wav(path, sample_rate=sample_rate)
    return log_mel(samples, rate, n_mels=n_mels, window_ms=window_ms, hop_ms=hop_ms)


def speech_vectors_file(path: str | Path, *, stack: int = STACK) -> np.ndarray:
    """A WAV file (any rate, resampled to 16 kHz) as
    :func:`~selfattn.speech.frontend.speech_vectors` vectors."""
    samples, rate = read_wav(path, sample_rate=SAMPLE_RATE)
    return speech_vectors(samples, rate, stack=stack)
