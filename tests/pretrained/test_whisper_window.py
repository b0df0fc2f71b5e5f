"""Truncated (window) self-attention in Whisper's encoder: a window covering every
position is full attention, a narrower one equals the dense band mask, and a position of
the first layer does not depend on the mel frames outside its receptive field."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from selfattn.pretrained.transcribe import Transcriber
from selfattn.pretrained.whisper import WhisperModel, load_whisper

from .whisper_fixtures import TINY

pytestmark = pytest.mark.usefixtures("one_thread")

FRAMES = 2 * TINY["max_source_positions"]  # 24 mel frames → 12 positions


@pytest.fixture()
def tiny(tiny_folder: Path) -> WhisperModel:
    return load_whisper(tiny_folder)


def _features(seed: int = 0) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(1, TINY["num_mel_bins"], FRAMES, generator=generator)


@torch.no_grad()
def test_a_window_covering_every_position_is_full_attention(tiny: WhisperModel) -> None:
    features = _features()
    full = tiny.encoder(features)
    tiny.encoder.use_window(TINY["max_source_positions"])
    torch.testing.assert_close(tiny.encoder(features), full, rtol=1e-5, atol=1e-5)
    tiny.encoder.use_window(2)
    narrow = tiny.encoder(features)
    assert not torch.allclose(narrow, full, atol=1e-3)
    # The window kernel computes the dense formula under the band mask, in S · w time.
    band = tiny.encoder.stack(tiny.encoder.embed(features), window=2).last_hidden_state
    torch.testing.assert_close(narrow, band, rtol=1e-5, atol=1e-5)
    tiny.encoder.use_window(None)
    torch.testing.assert_close(tiny.encoder(features), full)
    assert tiny.encoder.window is None


@torch.no_grad()
def test_the_first_layer_reads_only_its_receptive_field(tiny: WhisperModel) -> None:
    window, position = 2, 5
    tiny.encoder.use_window(window)
    # Position j reads mel frames 2j − 2 … 2j + 2; the first layer, positions j ± window.
    low, high = 2 * (position - window) - 2, 2 * (position + window) + 2
    features = _features()
    outside = features.clone()
    outside[..., :low] += 5.0
    outside[..., high + 1 :] -= 5.0
    inside = features.clone()
    inside[..., high] += 50.0  # the last frame it reads

    def first_layer(f: torch.Tensor) -> torch.Tensor:
        return tiny.encoder.stack(tiny.encoder.embed(f)).hidden_states[1][0]

    base = first_layer(features)
    moved = first_layer(outside)
    torch.testing.assert_close(moved[position], base[position], rtol=1e-5, atol=1e-5)
    assert not torch.allclose(moved[position + window + 2], base[position + window + 2])
    assert not torch.allclose(first_layer(inside)[position], base[position], rtol=0, atol=1e-6)


def test_a_negative_window_is_refused(tiny: WhisperModel, tiny_folder: Path) -> None:
    with pytest.raises(ValueError, match="the encoder's window must be at least 0, got -1"):
        tiny.encoder.use_window(-1)
    with pytest.raises(ValueError, match="the encoder's window must be at least 0, got -3"):
        Transcriber(tiny_folder, encoder_window=-3)
    assert Transcriber(tiny_folder, encoder_window=4).model.encoder.window == 4
