"""The speech front end of the speech recipes: log-mel frames, normalised and stacked.

Every speech dataset in selfattn — the espeak-ng recipes and a user's folder of WAV files
(read by :mod:`selfattn.data.readers.audio`) — goes through :func:`speech_vectors`, so a
model trained on one reads the other's vectors:

1. :func:`~selfattn.speech.features.log_mel` at 16 kHz: ``N_MELS`` = 40 log-mel values per
   25 ms window, every 10 ms;
2. per-utterance mean and variance normalisation of each mel band (CMVN, as in Kaldi's
   ``apply-cmvn``): the recording's loudness and channel drop out;
3. ``STACK`` = 3 consecutive frames concatenated into one 120-vector every 30 ms, the low
   frame rate of Pundak & Sainath (2016) and Sak et al. (2015): a third of the vectors,
   a ninth of the attention's cost, no information lost.
"""

from __future__ import annotations

import numpy as np

from selfattn.speech.features import SAMPLE_RATE, log_mel

__all__ = ["N_MELS", "STACK", "normalize_utterance", "speech_vectors"]

#: Mel bands per 10 ms frame.
N_MELS = 40
#: Frames concatenated into one vector (one vector per 30 ms).
STACK = 3


def normalize_utterance(frames: np.ndarray) -> np.ndarray:
    """``(F, M)`` frames with each band shifted to mean 0 and scaled to variance 1 over
    the utterance (a constant band, e.g. digital silence, becomes 0)."""
    mean = frames.mean(axis=0, keepdims=True)
    std = frames.std(axis=0, keepdims=True)
    return ((frames - mean) / np.maximum(std, 1e-5)).astype(np.float32)


def stack_frames(frames: np.ndarray, stack: int) -> np.ndarray:
    """``(F, M)`` → ``(F // stack, stack · M)``: each row the next ``stack`` frames side by
    side (a last incomplete group is dropped)."""
    usable = frames.shape[0] // stack * stack
    return np.ascontiguousarray(frames[:usable].reshape(-1, stack * frames.shape[1]))


def speech_vectors(samples: np.ndarray, sample_rate: int, *, stack: int = STACK) -> np.ndarray:
    """``(N,)`` samples at ``sample_rate`` (16 kHz) → ``(L, stack · N_MELS)`` float32
    vectors, L = ⌊frames / stack⌋ ≈ 33 a second with the default ``STACK``; ``stack = 1``
    keeps every 10 ms frame (frame-level labels: ``phones-espeak``)."""
    if sample_rate != SAMPLE_RATE:
        raise ValueError(f"speech_vectors expects {SAMPLE_RATE} Hz samples, got {sample_rate}")
    frames = log_mel(samples, sample_rate, n_mels=N_MELS).numpy()  # (F, N_MELS)
    return stack_frames(normalize_utterance(frames), stack)
