"""WAV reading and log-mel features: frame counts, where a tone's energy lands, errors."""

from __future__ import annotations

import wave
from pathlib import Path

import librosa
import numpy as np
import pytest
import soundfile
import torch

from selfattn.data.readers.audio import log_mel_file, read_audio, read_wav
from selfattn.datatypes import DataError
from selfattn.speech import LOG_FLOOR, frame_sizes, log_mel, mel_filterbank, num_frames, resample


def _sine(freq: float, seconds: float, rate: int) -> np.ndarray:
    t = np.arange(int(seconds * rate)) / rate
    return (0.5 * np.sin(2 * np.pi * freq * t)).astype(np.float32)


def _write_pcm16(path: Path, samples: np.ndarray, rate: int) -> np.ndarray:
    """Write ``(N,)`` or ``(N, channels)`` floats as 16-bit PCM with the stdlib; return the
    integers written."""
    ints = np.round(np.clip(samples, -1, 1) * 32767).astype("<i2")
    with wave.open(str(path), "wb") as out:
        out.setnchannels(1 if ints.ndim == 1 else ints.shape[1])
        out.setsampwidth(2)
        out.setframerate(rate)
        out.writeframes(ints.tobytes())
    return ints


# --------------------------------------------------------------------------- framing


@pytest.mark.parametrize(
    ("num_samples", "rate", "expected"),
    [
        (16_000, 16_000, 98),  # 1 s: 1 + (16000 − 400) // 160
        (400, 16_000, 1),  # exactly one window
        (399, 16_000, 0),  # shorter than one window
        (0, 16_000, 0),
        (559, 16_000, 1),  # one sample short of a second frame
        (560, 16_000, 2),
        (80_000, 16_000, 498),  # 5 s ≈ 500 vectors (the lecture's count)
        (8_000, 8_000, 98),  # the same second at 8 kHz: 200-sample window, 80 hop
        (22_050, 22_050, 98),  # 551-sample window, 221 hop
    ],
)
def test_num_frames(num_samples: int, rate: int, expected: int) -> None:
    assert num_frames(num_samples, rate) == expected
    if num_samples:
        features = log_mel(np.zeros(num_samples, dtype=np.float32), rate, n_mels=40)
        assert features.shape == (expected, 40)


def test_frame_sizes_round_half_up_and_reject_zero() -> None:
    assert frame_sizes(16_000) == (400, 160)
    assert frame_sizes(22_050) == (551, 221)  # 551.25 → 551, 220.5 → 221
    with pytest.raises(ValueError, match="at least one sample"):
        frame_sizes(16_000, hop_ms=0.01)


def test_log_mel_batches_and_keeps_tensor_dtype() -> None:
    signals = torch.randn(3, 8_000, dtype=torch.float64)
    batched = log_mel(signals, 16_000, n_mels=40)
    assert batched.shape == (3, num_frames(8_000, 16_000), 40)
    assert batched.dtype == torch.float64
    torch.testing.assert_close(batched[1], log_mel(signals[1], 16_000, n_mels=40))


def test_silence_is_the_log_floor() -> None:
    features = log_mel(np.zeros(1_600, dtype=np.float32), 16_000)
    assert torch.all(features == np.float32(np.log(LOG_FLOOR)))


# --------------------------------------------------------------------------- mel bins


@pytest.mark.parametrize("n_mels", [80, 40])
@pytest.mark.parametrize("freq", [150.0, 440.0, 1_000.0, 2_500.0, 6_000.0])
def test_a_tone_lands_in_the_mel_bins_around_its_frequency(n_mels: int, freq: float) -> None:
    features = log_mel(_sine(freq, 0.5, 16_000), 16_000, n_mels=n_mels)
    loudest = int(features.mean(dim=0).argmax())
    # Filter k peaks at centres[k] and spans centres[k − 1] … centres[k + 1] (librosa's
    # defaults: Slaney scale, 0 Hz to Nyquist); f lies inside the two filters around it.
    centres = librosa.mel_frequencies(n_mels + 2, fmin=0.0, fmax=8_000.0)[1:-1]
    above = int(np.searchsorted(centres, freq))
    assert loudest in (above - 1, above)


def test_a_tone_at_a_filter_centre_lands_in_that_filter() -> None:
    centres = librosa.mel_frequencies(82, fmin=0.0, fmax=8_000.0)[1:-1]
    for k in (10, 40, 70):
        features = log_mel(_sine(float(centres[k]), 0.5, 16_000), 16_000)
        assert int(features.mean(dim=0).argmax()) == k


def test_filterbank_shape_covers_the_spectrum() -> None:
    filters = mel_filterbank(16_000, 512, 80)
    assert filters.shape == (80, 257)
    assert torch.all(filters.max(dim=1).values > 0)  # no empty filter


# --------------------------------------------------------------------------- WAV files


def test_wav_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "tone.wav"
    ints = _write_pcm16(path, _sine(440.0, 0.25, 16_000), 16_000)
    samples, rate = read_wav(path)
    assert rate == 16_000
    assert samples.dtype == np.float32 and samples.shape == (4_000,)
    np.testing.assert_array_equal(samples, ints.astype(np.float32) / 32768)
    assert log_mel_file(path, n_mels=40).shape == (num_frames(4_000, 16_000), 40)


def test_stereo_becomes_mono(tmp_path: Path) -> None:
    path = tmp_path / "stereo.wav"
    left, right = _sine(300.0, 0.1, 8_000), _sine(900.0, 0.1, 8_000)
    ints = _write_pcm16(path, np.stack([left, right], axis=1), 8_000)
    samples, rate = read_wav(path)
    assert rate == 8_000 and samples.shape == (800,)
    np.testing.assert_allclose(samples, ints.astype(np.float32).mean(axis=1) / 32768, atol=1e-7)


def test_resampled_to_16k_keeps_the_tone(tmp_path: Path) -> None:
    path = tmp_path / "voice22k.wav"  # espeak-ng writes 22.05 kHz
    _write_pcm16(path, _sine(1_000.0, 0.5, 22_050), 22_050)
    samples, rate = read_wav(path, sample_rate=16_000)
    assert rate == 16_000 and samples.shape == (8_000,) and samples.dtype == np.float32
    at_16k = log_mel(samples, 16_000)
    at_22k = log_mel_file(path, sample_rate=None)  # the file's own rate
    assert at_16k.shape[0] == at_22k.shape[0] == 48  # same duration, same frame count
    # Same mel bin either way: 80 filters up to 8 kHz vs up to 11.025 kHz differ, so compare
    # against a direct 16 kHz tone rather than across rates.
    direct = log_mel(_sine(1_000.0, 0.5, 16_000), 16_000)
    assert int(at_16k.mean(0).argmax()) == int(direct.mean(0).argmax())
    assert resample(samples, 16_000, 16_000) is samples


def test_float_wav_is_read(tmp_path: Path) -> None:
    path = tmp_path / "float.wav"
    soundfile.write(path, np.linspace(-1, 1, 500, dtype=np.float32), 16_000, subtype="FLOAT")
    samples, _ = read_wav(path)
    np.testing.assert_array_equal(samples, np.linspace(-1, 1, 500, dtype=np.float32))


def test_read_audio_reads_flac_and_wav_alike(tmp_path: Path) -> None:
    stereo = np.stack([_sine(300.0, 0.1, 22_050), _sine(900.0, 0.1, 22_050)], axis=1)
    soundfile.write(tmp_path / "a.wav", stereo, 22_050, subtype="FLOAT")
    soundfile.write(tmp_path / "a.flac", stereo, 22_050, subtype="PCM_24")
    wav, wav_rate = read_audio(tmp_path / "a.wav", sample_rate=16_000)
    flac, flac_rate = read_audio(tmp_path / "a.flac", sample_rate=16_000)
    assert wav_rate == flac_rate == 16_000 and flac.dtype == np.float32
    assert flac.shape == wav.shape == (1_600,)
    np.testing.assert_allclose(flac, wav, atol=1e-5)  # 24-bit rounding
    # The content decides, not the suffix: FLAC in a file named .wav reads as FLAC.
    soundfile.write(tmp_path / "flac.wav", stereo, 22_050, "PCM_24", format="FLAC")
    np.testing.assert_array_equal(
        read_audio(tmp_path / "flac.wav")[0], read_audio(tmp_path / "a.flac")[0]
    )
    (tmp_path / "text.flac").write_text("not audio at all " * 20)
    with pytest.raises(DataError, match=r"text\.flac: not a WAV or FLAC file"):
        read_audio(tmp_path / "text.flac")
    with pytest.raises(DataError, match=r"a\.wav: not a FLAC file \(it is WAV"):
        read_audio(tmp_path / "a.wav", formats=("FLAC",))


def _one_line_naming(error: pytest.ExceptionInfo[BaseException], path: Path) -> str:
    message = str(error.value)
    assert str(path) in message and "\n" not in message
    return message


def test_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "nope.wav"
    with pytest.raises(FileNotFoundError) as error:
        read_wav(path)
    assert "no such file" in _one_line_naming(error, path)


@pytest.mark.parametrize(
    ("name", "write", "expected"),
    [
        ("text.wav", lambda p: p.write_text("not audio at all " * 20), "not a WAV file"),
        ("zero.wav", lambda p: p.write_bytes(b""), "empty file"),
        (
            "song.flac",
            lambda p: soundfile.write(p, np.zeros(100, dtype=np.float32), 16_000),
            "not a WAV file (it is FLAC",
        ),
    ],
)
def test_not_a_wav(tmp_path: Path, name: str, write: object, expected: str) -> None:
    path = tmp_path / name
    write(path)  # type: ignore[operator]
    with pytest.raises(DataError) as error:
        read_wav(path)
    assert expected in _one_line_naming(error, path)


def test_wav_without_samples(tmp_path: Path) -> None:
    path = tmp_path / "header-only.wav"
    with wave.open(str(path), "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(16_000)
    with pytest.raises(DataError) as error:
        read_wav(path)
    assert "no samples" in _one_line_naming(error, path)


def test_directory_is_not_a_wav(tmp_path: Path) -> None:
    with pytest.raises(DataError) as error:
        read_wav(tmp_path)
    assert "not a file" in _one_line_naming(error, tmp_path)
