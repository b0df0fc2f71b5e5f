"""Recordings longer than Whisper's 30 s window: cut at quiet moments, window by window,
and the transcripts joined (``chunk``), or refused in one line naming the option."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest
import soundfile

from selfattn.pretrained.errors import PretrainedError
from selfattn.pretrained.transcribe import Transcriber, chunk_bounds, word_error_rate

pytestmark = pytest.mark.usefixtures("one_thread")


def _bursts(lengths: list[int], gap: int, seed: int = 0) -> tuple[np.ndarray, list[range]]:
    """Noise bursts of ``lengths`` samples, ``gap`` silent samples after each; the gaps."""
    rng = np.random.default_rng(seed)
    parts, gaps, at = [], [], 0
    for length in lengths:
        parts += [0.3 * rng.standard_normal(length), np.zeros(gap)]
        gaps.append(range(at + length, at + length + gap))
        at += length + gap
    return np.concatenate(parts).astype(np.float32), gaps


def test_cuts_fall_in_the_quiet_and_the_pieces_cover_the_recording() -> None:
    samples, gaps = _bursts([700, 650, 800, 720, 500], gap=100)
    bounds = chunk_bounds(samples, 1000, search=400, frame=20)
    assert bounds[0][0] == 0 and bounds[-1][1] == samples.shape[0]
    assert all(a[1] == b[0] for a, b in itertools.pairwise(bounds))
    assert all(0 < end - start <= 1000 for start, end in bounds)
    assert len(bounds) > 3
    for _, cut in bounds[:-1]:
        assert any(cut in gap for gap in gaps), cut
    assert chunk_bounds(samples[:1000], 1000) == [(0, 1000)]


def test_a_long_recording_is_transcribed_window_by_window(
    tiny_folder: Path, tmp_path: Path
) -> None:
    samples, _ = _bursts([1500, 1700, 1200], gap=400)  # 0.31 s, the tiny model reads 0.24
    wav = tmp_path / "long.wav"
    soundfile.write(str(wav), samples, 16000)
    refusing = Transcriber(tiny_folder)
    with pytest.raises(PretrainedError) as caught:
        refusing(wav)
    message = str(caught.value)
    assert f"{wav}: 0.3 s long; Whisper reads at most 0.24 s" in message
    assert "--chunk" in message and "\n" not in message
    chunking = Transcriber(tiny_folder, chunk=True)
    pieces = [samples[a:b] for a, b in chunk_bounds(samples, chunking.window_samples)]
    want = " ".join(refusing.transcribe_samples(piece) for piece in pieces)
    assert len(pieces) == 2 and chunking(wav) == want and want


def test_predict_reads_chunk_and_other_checkpoints_refuse_it(
    tiny_folder: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from selfattn.cli.main import main

    samples, _ = _bursts([1500, 1700, 1200], gap=400)
    wav = tmp_path / "long.wav"
    soundfile.write(str(wav), samples, 16000)
    assert main(["predict", str(tiny_folder), str(wav)]) == 2
    assert "--chunk" in capsys.readouterr().err
    assert main(["predict", str(tiny_folder), str(wav), "--chunk"]) == 0
    assert capsys.readouterr().out.strip()
    short = tmp_path / "short.wav"
    soundfile.write(str(short), samples[:1600], 16000)
    faster = ["--encoder-seconds", "0.1", "--encoder-window", "2"]
    assert main(["predict", str(tiny_folder), str(short), *faster]) == 0
    assert capsys.readouterr().out.strip()
    assert main(["predict", str(tiny_folder), str(short), "--encoder-seconds", "0"]) == 2
    assert "encoder_seconds must be > 0, got 0.0" in capsys.readouterr().err
    run = tmp_path / "not-a-run"
    run.mkdir()
    for flag in (["--chunk"], ["--encoder-window", "4"], ["--encoder-seconds", "9"]):
        assert main(["predict", str(run), "hello", *flag]) == 2
        error = capsys.readouterr().err.strip()
        assert f"{flag[0]} applies to Whisper checkpoints only" in error and "\n" not in error


@pytest.mark.slow
def test_whisper_base_transcribes_a_minute_of_concatenated_recordings(
    whisper_folder: Path, librivox: dict[str, tuple[Path, str]], tmp_path: Path
) -> None:
    from selfattn.data.readers.audio import read_wav

    parts, references = [], []
    for wav, reference in [*librivox.values(), *librivox.values()]:
        samples, _ = read_wav(wav, sample_rate=16000)
        parts += [samples, np.zeros(8000, np.float32)]  # half a second between them
        references.append(reference)
    long = tmp_path / "long.wav"
    soundfile.write(str(long), np.concatenate(parts), 16000)
    transcriber = Transcriber(whisper_folder, chunk=True)
    text = transcriber(long)
    assert word_error_rate([text], [" ".join(references)]) <= 0.05


def test_the_encoder_reads_fewer_seconds_when_asked(tiny_folder: Path, tmp_path: Path) -> None:
    from selfattn.pretrained.transcribe import greedy_tokens

    full, short = Transcriber(tiny_folder), Transcriber(tiny_folder, encoder_seconds=0.1)
    samples, _ = _bursts([700], gap=100)  # 0.05 s
    assert full.features(samples).shape[-1] == 24  # the tiny model's whole window
    assert short.features(samples).shape[-1] == 10  # 0.1 s of 10 ms frames
    longer, _ = _bursts([2300], gap=100)  # 0.15 s: itself, up to a whole 20 ms position
    assert short.features(longer).shape[-1] == 16
    wav = tmp_path / "a.wav"
    soundfile.write(str(wav), samples, 16000)
    ids = greedy_tokens(short.model, short.features(samples), short.prefix).ids
    assert short(wav) == short.tokenizer.decode(ids)
    with pytest.raises(ValueError, match="encoder_seconds must be > 0, got 0"):
        Transcriber(tiny_folder, encoder_seconds=0)


@pytest.mark.slow
def test_whisper_base_reading_15_seconds_transcribes_as_it_does_30(
    whisper_folder: Path, librivox: dict[str, tuple[Path, str]]
) -> None:
    wav, _ = librivox["sense_and_sensibility_01_austen_64kb-0880"]
    shorter = Transcriber(whisper_folder, encoder_seconds=15)
    assert shorter.features(np.zeros(16000, np.float32)).shape[-1] == 1500
    assert shorter(wav) == "He was not an ill-disposed young man."
