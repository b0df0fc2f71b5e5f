"""Whisper's log-mel front end (Radford et al. 2022, §2.2): 16 kHz samples → 80 × 3000.

Whisper reads 30 s windows: the recording is padded with zeros (or cut) to 480,000
samples, then

1. a short-time Fourier transform over ``n_fft`` = 400 samples (25 ms) every 160 (10 ms),
   Hann window, centred (reflection padding), the last frame dropped: 3000 frames;
2. the power spectrum ``|STFT|²`` through 80 Slaney mel filters (librosa's, 0 – 8 kHz,
   :func:`~selfattn.speech.features.mel_filterbank`);
3. ``log10`` (floored at 1e-10), clamped from below at the window's maximum − 8 (an 80 dB
   range), then scaled as ``(x + 4) / 4`` to lie around [−1, 1].

The padding is part of the window (its zeros sit at the floor of step 3), which is why the
model reads 3000 frames whatever the recording's length; ``num_samples=None`` computes the
recording's own frames instead (``⌊N / 160⌋``), for an encoder that reads fewer positions.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

from selfattn.speech.features import mel_filterbank

__all__ = [
    "WHISPER_FRAMES",
    "WHISPER_HOP",
    "WHISPER_N_FFT",
    "WHISPER_SAMPLES",
    "WHISPER_SAMPLE_RATE",
    "whisper_log_mel",
]

WHISPER_SAMPLE_RATE = 16_000
WHISPER_N_FFT = 400
WHISPER_HOP = 160
#: 30 s: the samples and the frames of one window.
WHISPER_SAMPLES = 30 * WHISPER_SAMPLE_RATE
WHISPER_FRAMES = WHISPER_SAMPLES // WHISPER_HOP


def whisper_log_mel(
    samples: np.ndarray | Tensor,
    *,
    n_mels: int = 80,
    num_samples: int | None = WHISPER_SAMPLES,
) -> Tensor:
    """Whisper's log-mel spectrogram of one 16 kHz recording.

    Args:
        samples: ``(N,)`` mono samples in [−1, 1] at 16 kHz.
        n_mels: mel bands (80; 128 for large-v3).
        num_samples: pad with zeros or cut to this many samples first (Whisper's 30 s);
            ``None``: the recording as it is.

    Returns:
        ``(n_mels, num_samples // 160)`` float32.
    """
    x = torch.as_tensor(samples, dtype=torch.float32).flatten()
    if num_samples is not None:
        x = torch.nn.functional.pad(x[:num_samples], (0, max(0, num_samples - x.shape[0])))
    window = torch.hann_window(WHISPER_N_FFT)
    stft = torch.stft(x, WHISPER_N_FFT, WHISPER_HOP, window=window, return_complex=True)
    power = stft[..., :-1].abs() ** 2  # (n_fft // 2 + 1, frames)
    mel = mel_filterbank(WHISPER_SAMPLE_RATE, WHISPER_N_FFT, n_mels).float() @ power
    log = mel.clamp(min=1e-10).log10()
    log = torch.maximum(log, log.max() - 8.0)
    return (log + 4.0) / 4.0
