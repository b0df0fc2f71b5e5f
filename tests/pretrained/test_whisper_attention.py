"""Whisper's cross-attention over a recording (the alignment picture): one map per
decoder layer, a row per emitted token whose weights sum to 1, drawn to a PNG by
``selfattn attention``."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import soundfile
import torch

from selfattn.pretrained.errors import PretrainedError
from selfattn.pretrained.transcribe import Transcriber
from selfattn.pretrained.whisper_attention import cross_attention

from .whisper_fixtures import TINY

pytestmark = pytest.mark.usefixtures("one_thread")


def _wav(path: Path, seconds: float, amplitude: float = 0.3) -> Path:
    rng = np.random.default_rng(2)
    samples = (amplitude * rng.standard_normal(int(seconds * 16000))).astype(np.float32)
    soundfile.write(str(path), samples, 16000)
    return path


def test_every_token_attends_over_the_encoder_positions(tiny_folder: Path, tmp_path: Path) -> None:
    transcriber = Transcriber(tiny_folder)
    wav = _wav(tmp_path / "a.wav", 0.15)
    alignment = cross_attention(transcriber, wav)
    assert alignment.text == transcriber(wav)
    assert alignment.tokens[-1] == "<|endoftext|>"
    assert len(alignment.maps) == TINY["decoder_layers"]
    positions = TINY["max_source_positions"]
    for weights in alignment.maps:
        assert weights.shape == (TINY["decoder_attention_heads"], len(alignment.tokens), positions)
        torch.testing.assert_close(weights.sum(-1), torch.ones(weights.shape[:2]))
    assert alignment.positions == 8  # 0.15 s: 15 frames of 10 ms, 8 positions of 20 ms
    assert alignment.recording_maps()[0].shape[-1] == 8


def test_attention_draws_whispers_cross_attention(
    tiny_folder: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from selfattn.cli.main import main

    wav, png = _wav(tmp_path / "a.wav", 0.15), tmp_path / "align.png"
    assert main(["attention", str(tiny_folder), str(wav), "-o", str(png), "--beam", "2"]) == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "cross-attention (2 decoder layers × 2 heads)" in capsys.readouterr().out
    assert main(["attention", str(tiny_folder), str(wav), "--stats"]) == 2
    assert "--stats does not apply to a Whisper checkpoint" in capsys.readouterr().err
    silent = _wav(tmp_path / "silent.wav", 0.15, amplitude=0.0)
    with pytest.raises(PretrainedError, match="silent, no alignment to draw"):
        cross_attention(Transcriber(tiny_folder), silent)
