"""Speech as a vector set: samples to log-mel frames (lecture 000, §"Vector set as input").

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
and the resampler (soxr). librosa's own ``melspectrogram`` is not used: its first call
JIT-compiles numba code (tens of seconds). Reading a WAV or FLAC file, and refusing one
that is not, is the data layer's (:mod:`selfattn.data.readers.audio`): this module works
on samples and knows nothing of files or of the data's error type.
"""

from __future__ import annotations

import functools

import librosa
import numpy as np
import torch
from torch import Tensor

__all__ = [
    "LOG_FLOOR",
    "SAMPLE_RATE",
    "frame_sizes",
    "log_mel",
    "mel_filterbank",
    "num_frames",
    "resample",
]

#: The rate speech models conventionally work at (16 kHz: telephone to wide-band speech).
SAMPLE_RATE = 16_000
#: Smallest mel power before the log: ``log(1e-10) ≈ −23`` stands for silence.
LOG_FLOOR = 1e-10


# --------------------------------------------------------------------------- resampling


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
