"""Speech as a vector set: WAV files to log-mel frames (lecture 000, §"Vector set as input").

The lecture turns a sound signal into vectors by sliding a *window* of 25 ms along it in
steps (the *hop*) of 10 ms; each window becomes one vector, a *frame*, so one second of
speech is 100 vectors and a sentence is thousands — why speech needs truncated attention.
Here each frame is the log of a mel-scaled power spectrum (Davis & Mermelstein 1980; the
filterbank front end of Kaldi, Povey et al. 2011, and of Whisper, Radford et al. 2022):

1. frames: ``1 + (N − W) // hop`` windows of W samples, no centring and no padding, so a
   frame never extends past the signal (:func:`num_frames`);
2. a Hann window, then the power spectrum ``|rfft|²`` over ``n_fft`` points, the next power
   of two ≥ W (Kaldi's ``round_to_power_of_two``: 512 for 400 samples at 16 kHz);
3. ``n_mels`` triangular mel filters — librosa's ``filters.mel``, Slaney's mel scale and
   area normalisation, from 0 Hz to the Nyquist frequency;
4. the natural log, floored at ``LOG_FLOOR`` so silence gives a finite value.

Steps 1, 2 and 4 run in torch (batched, on any device); librosa provides the filterbank
and the resampler (soxr), soundfile (libsndfile) reads the files. librosa's own
``melspectrogram`` is not used: its first call JIT-compiles numba code for ~25 s.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Literal

import librosa
import numpy as np
import soundfile
import torch
from torch import Tensor

from selfattn.data.types import DataError

__all__ = [
    "AUDIO_FORMATS",
    "LOG_FLOOR",
    "SAMPLE_RATE",
    "frame_sizes",
    "log_mel",
    "log_mel_file",
    "mel_filterbank",
    "num_frames",
    "read_audio",
    "read_wav",
    "resample",
]

AudioFormat = Literal["WAV", "FLAC"]

#: The rate speech models conventionally work at (16 kHz: telephone to wide-band speech).
SAMPLE_RATE = 16_000
#: Smallest mel power before the log: ``log(1e-10) ≈ −23`` stands for silence.
LOG_FLOOR = 1e-10
#: libsndfile's names of the containers read, by the name messages give them: RIFF/WAVE
#: (WAVEX: WAVE_FORMAT_EXTENSIBLE; RF64: WAVE past 4 GB) and FLAC.
AUDIO_FORMATS: dict[AudioFormat, frozenset[str]] = {
    "WAV": frozenset({"WAV", "WAVEX", "RF64"}),
    "FLAC": frozenset({"FLAC"}),
}


# --------------------------------------------------------------------------- reading


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
        sample_rate: resample to this rate (e.g. :data:`SAMPLE_RATE`); ``None`` keeps the
            file's own rate.
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


def resample(samples: np.ndarray, orig_rate: int, target_rate: int) -> np.ndarray:
    """Change the sample rate with librosa's high-quality soxr resampler.

    Args:
        samples: ``(..., N)`` float samples.
        orig_rate: their rate in Hz.
        target_rate: the rate wanted.

    Returns:
        ``(..., ⌈N · target_rate / orig_rate⌉)`` samples of the same dtype.
    """
    if orig_rate < 1 or target_rate < 1:
        raise ValueError(f"sample rates must be positive, got {orig_rate} and {target_rate}")
    if orig_rate == target_rate:
        return samples
    return librosa.resample(samples, orig_sr=orig_rate, target_sr=target_rate, res_type="soxr_hq")


# --------------------------------------------------------------------------- framing


def frame_sizes(sample_rate: int, window_ms: float = 25.0, hop_ms: float = 10.0) -> tuple[int, int]:
    """``(window, hop)`` in samples: the durations times the rate, rounded half up
    (400 and 160 at 16 kHz; 551 and 221 at 22.05 kHz)."""
    if sample_rate < 1:
        raise ValueError(f"sample_rate must be positive, got {sample_rate}")
    window = int(sample_rate * window_ms / 1000 + 0.5)
    hop = int(sample_rate * hop_ms / 1000 + 0.5)
    if window < 1 or hop < 1:
        raise ValueError(
            f"window ({window_ms} ms) and hop ({hop_ms} ms) must each span at least one "
            f"sample at {sample_rate} Hz"
        )
    return window, hop


def num_frames(
    num_samples: int, sample_rate: int, window_ms: float = 25.0, hop_ms: float = 10.0
) -> int:
    """How many frames :func:`log_mel` makes of ``num_samples`` samples.

    Frames are not centred and the signal is not padded: frame t covers samples
    ``[t·hop, t·hop + W)`` and only whole windows count, so with W and hop from
    :func:`frame_sizes` the count is ``1 + (N − W) // hop``, or 0 when N < W. One second at
    16 kHz is ``1 + (16000 − 400) // 160 = 98`` frames (≈ 100 a second, as the lecture says).
    """
    if num_samples < 0:
        raise ValueError(f"num_samples must be >= 0, got {num_samples}")
    window, hop = frame_sizes(sample_rate, window_ms, hop_ms)
    return 0 if num_samples < window else 1 + (num_samples - window) // hop


# --------------------------------------------------------------------------- log-mel


@functools.lru_cache(maxsize=32)
def _filterbank(sample_rate: int, n_fft: int, n_mels: int) -> np.ndarray:
    weights = librosa.filters.mel(sr=sample_rate, n_fft=n_fft, n_mels=n_mels)
    weights.setflags(write=False)  # shared by every caller through the cache
    return weights


def mel_filterbank(sample_rate: int, n_fft: int, n_mels: int = 80) -> Tensor:
    """``(n_mels, n_fft // 2 + 1)`` triangular mel filters over the rfft bins, from librosa
    (Slaney's mel scale and area normalisation, 0 Hz to ``sample_rate / 2``)."""
    return torch.tensor(_filterbank(sample_rate, n_fft, n_mels))


def _fft_size(window: int) -> int:
    """The next power of two ≥ ``window``."""
    return 1 << (window - 1).bit_length()


def log_mel(
    samples: np.ndarray | Tensor,
    sample_rate: int,
    *,
    n_mels: int = 80,
    window_ms: float = 25.0,
    hop_ms: float = 10.0,
) -> Tensor:
    """Log-mel features: one ``n_mels``-vector per 25 ms window, every 10 ms.

    Args:
        samples: ``(N,)`` or batched ``(..., N)`` samples at ``sample_rate`` (a NumPy
            array or a tensor; a floating tensor keeps its dtype and device, anything else
            becomes float32 on the CPU).
        sample_rate: Hz; the window and hop are converted to samples at this rate.
        n_mels: mel filters, i.e. the size of each vector (80 or 40 are usual).
        window_ms: the window's length.
        hop_ms: the step between windows.

    Returns:
        ``(..., F, n_mels)`` natural-log mel power with F = :func:`num_frames` (0 rows
        when the signal is shorter than one window).
    """
    if n_mels < 1:
        raise ValueError(f"n_mels must be positive, got {n_mels}")
    x = torch.as_tensor(samples)
    if not x.is_floating_point():
        x = x.float()
    if x.dim() == 0:
        raise ValueError("samples must have at least one dimension (..., N), got a scalar")
    window, hop = frame_sizes(sample_rate, window_ms, hop_ms)
    n_fft = _fft_size(window)
    filters = mel_filterbank(sample_rate, n_fft, n_mels).to(x.device, x.dtype)
    if x.shape[-1] < window:
        return x.new_zeros((*x.shape[:-1], 0, n_mels))
    frames = x.unfold(-1, window, hop)  # (..., F, W), a view
    hann = torch.hann_window(window, dtype=x.dtype, device=x.device)
    power = torch.fft.rfft(frames * hann, n=n_fft).abs().square()  # (..., F, n_fft/2 + 1)
    return torch.log(torch.clamp(power @ filters.T, min=LOG_FLOOR))  # (..., F, n_mels)


def log_mel_file(
    path: str | Path,
    *,
    sample_rate: int | None = SAMPLE_RATE,
    n_mels: int = 80,
    window_ms: float = 25.0,
    hop_ms: float = 10.0,
) -> Tensor:
    """:func:`read_wav` then :func:`log_mel`: a WAV file as ``(F, n_mels)`` vectors.

    Args:
        path: the ``.wav`` file.
        sample_rate: resample to this rate first (16 kHz by default); ``None`` keeps the
            file's rate.
        n_mels, window_ms, hop_ms: as in :func:`log_mel`.
    """
    samples, rate = read_wav(path, sample_rate=sample_rate)
    return log_mel(samples, rate, n_mels=n_mels, window_ms=window_ms, hop_ms=hop_ms)
