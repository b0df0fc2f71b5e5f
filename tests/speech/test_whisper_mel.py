"""Whisper's log-mel front end equals Hugging Face's WhisperFeatureExtractor."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import transformers

from selfattn.speech.whisper_mel import WHISPER_FRAMES, WHISPER_SAMPLES, whisper_log_mel

pytestmark = pytest.mark.usefixtures("one_thread")


def _speechlike(seconds: float, seed: int = 0) -> np.ndarray:
    """A chirp with harmonics and a little noise: energy spread over the mel bands."""
    rng = np.random.default_rng(seed)
    t = np.arange(int(seconds * 16000)) / 16000
    f0 = 120 + 80 * np.sin(2 * np.pi * 0.7 * t)
    phase = 2 * np.pi * np.cumsum(f0) / 16000
    wave = sum(np.sin(k * phase) / k for k in range(1, 12)) * (0.5 + 0.5 * np.sin(3 * t))
    return (0.2 * wave + 0.01 * rng.standard_normal(t.shape)).astype(np.float32)


@pytest.mark.parametrize("seconds", [3.7, 31.0])
def test_equals_hugging_faces_feature_extractor(seconds: float) -> None:
    samples = _speechlike(seconds)
    extractor = transformers.WhisperFeatureExtractor()
    theirs = extractor(samples, sampling_rate=16000, return_tensors="np").input_features[0]
    ours = whisper_log_mel(samples)
    assert ours.shape == (80, WHISPER_FRAMES) == theirs.shape
    assert float((ours - torch.from_numpy(theirs)).abs().max()) < 1e-4
    assert float(ours.max() - ours.min()) == pytest.approx(2.0)  # the 80 dB range, / 4


def test_the_recordings_own_frames_without_the_window() -> None:
    samples = _speechlike(2.0)
    frames = whisper_log_mel(samples, num_samples=None)
    assert frames.shape == (80, 2 * 16000 // 160)
    padded = whisper_log_mel(samples)
    # The padding's zeros lie at the floor, which the clamp lifts to max − 8: the same max,
    # so the recording's frames agree wherever their STFT window saw no padding.
    torch.testing.assert_close(frames[:, :-2], padded[:, : frames.shape[1] - 2])
    assert WHISPER_SAMPLES == 480_000
