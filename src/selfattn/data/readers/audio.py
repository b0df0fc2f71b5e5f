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

from selfattn.datatypes import DataError
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

#: The sample rates read, in Hz: from below telephone speech (8 kHz) to studio masters
#: (384 kHz). A header outside them lies (or the file is not audio); resampling a 1 Hz
#: file to 16 kHz would make 16,000 samples of every one.
MIN_SAMPLE_RATE, MAX_SAMPLE_RATE = 1_000, 384_000
#: The longest recording read, in seconds, and the most channels: together they bound the
#: samples held (10 minutes of 384 kHz stereo is 1.8 GB of float32).
MAX_SECONDS = 600
MAX_CHANNELS = 8
#: The largest sample magnitude read (a float file's full scale is ±1; integer files are
#: read within it): past it, squaring the samples for the spectrum overflows or the
#: features mean nothing.
MAX_AMPLITUDE = 1_000.0


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
        DataError: a directory, a file of another format, one with no samples, one out
            of bounds (:func:`check_size`) or holding samples that are not finite numbers
            (:func:`check_samples`); the one-line message starts with the path.
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
    check_size(path, info.samplerate, info.frames, info.channels)
    data, rate = soundfile.read(str(path), dtype="float32", always_2d=True)  # (N, channels)
    check_samples(path, data)
    samples = data.mean(axis=1, dtype=np.float32) if data.shape[1] > 1 else data[:, 0]
    if sample_rate is not None and sample_rate != rate:
        return resample(samples, rate, sample_rate), sample_rate
    return np.ascontiguousarray(samples), int(rate)


def check_size(path: Path, rate: int, frames: int, channels: int) -> None:
    """Refuse, from the header, a sample rate outside :data:`MIN_SAMPLE_RATE` …
    :data:`MAX_SAMPLE_RATE`, a recording past :data:`MAX_SECONDS` or over
    :data:`MAX_CHANNELS` channels.

    Raises:
        DataError: one line naming the file, what its header says and the limit.
    """
    if not MIN_SAMPLE_RATE <= rate <= MAX_SAMPLE_RATE:
        raise DataError(
            f"{path}: sample rate {rate} Hz; audio is read at {MIN_SAMPLE_RATE:,} to "
            f"{MAX_SAMPLE_RATE:,} Hz"
        )
    if frames > MAX_SECONDS * rate:
        raise DataError(
            f"{path}: {frames / rate:,.1f} s of audio; recordings are read up to {MAX_SECONDS} "
            "s (cut it into shorter files)"
        )
    if channels > MAX_CHANNELS:
        raise DataError(f"{path}: {channels} channels; audio is read up to {MAX_CHANNELS}")


def check_samples(path: Path, data: np.ndarray) -> None:
    """Refuse ``(N, channels)`` samples holding NaN, an infinity or a magnitude past
    :data:`MAX_AMPLITUDE`.

    Raises:
        DataError: ``path: sample 1234 is nan; …``, the first bad sample's index (in
            frames from the start).
    """
    bad = ~(np.abs(data) <= MAX_AMPLITUDE)  # NaN compares false, so it is bad too
    if bad.any():
        frame = int(np.flatnonzero(bad.any(axis=1))[0])
        value = float(data[frame][bad[frame]][0])
        raise DataError(
            f"{path}: sample {frame} is {value:g}; audio samples must be finite and within "
            f"±{MAX_AMPLITUDE:g} (full scale is ±1)"
        )


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
