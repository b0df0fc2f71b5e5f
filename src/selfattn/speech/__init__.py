"""Speech input (lecture 000, §Self-attention for Speech): samples to log-mel frames, one
vector per 25 ms window every 10 ms. The files are read by the data layer
(:mod:`selfattn.data.readers.audio`).

    >>> samples, rate = read_wav("seven.wav", sample_rate=SAMPLE_RATE)  # data.readers.audio
    >>> features = log_mel(samples, rate, n_mels=80)  # (frames, 80), 100 frames a second
    >>> vectors = speech_vectors(samples, rate)  # (frames // 3, 120): the recipes' front end
"""

from __future__ import annotations

from selfattn.speech.features import (
    LOG_FLOOR,
    SAMPLE_RATE,
    frame_sizes,
    log_mel,
    mel_filterbank,
    num_frames,
    resample,
)
from selfattn.speech.frontend import (
    N_MELS,
    STACK,
    normalize_utterance,
    speech_vectors,
)

__all__ = [
    "LOG_FLOOR",
    "N_MELS",
    "SAMPLE_RATE",
    "STACK",
    "frame_sizes",
    "log_mel",
    "mel_filterbank",
    "normalize_utterance",
    "num_frames",
    "resample",
    "speech_vectors",
]
