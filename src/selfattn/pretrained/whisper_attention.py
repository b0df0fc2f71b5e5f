"""Whisper's cross-attention over a recording: the alignment picture of lecture 001.

Each decoder layer's cross-attention gives every output token a distribution over the
encoder's positions (20 ms of audio each): where in the recording the decoder "looks"
while it emits that token. Drawn tokens × positions, the heads that align trace a
staircase from the first word's sound to the last one's.

The recording is transcribed first (the transcriber's own search, and its temperature
fallback if it has one), then the decoder reads the task prefix and the transcript in one
teacher-forced pass with its weights kept. Row t of a map is the query that emitted token
t (the last one ``<|endoftext|>``).

>>> alignment = cross_attention(Transcriber("whisper-base"), "recording.wav")
>>> alignment.maps[5].shape                      # (heads, tokens, positions)
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor

from selfattn.data.readers.audio import read_audio
from selfattn.pretrained.errors import PretrainedError
from selfattn.pretrained.transcribe import SILENCE_PEAK, Transcriber
from selfattn.speech.whisper_mel import WHISPER_HOP, WHISPER_SAMPLE_RATE

__all__ = ["CrossAttention", "cross_attention"]


@dataclass(frozen=True)
class CrossAttention:
    """A transcript's cross-attention over the encoder's positions.

    Attributes:
        tokens: the emitted tokens as text (``<|endoftext|>`` last): the maps' rows.
        maps: per decoder layer ``(H, T, S)``, the weights over every position the encoder
            read (each row sums to 1).
        positions: the encoder positions that hold the recording (the rest is padding).
        seconds_per_position: 0.02 for Whisper.
        text: the transcript.
    """

    tokens: list[str]
    maps: list[Tensor]
    positions: int
    seconds_per_position: float
    text: str

    def recording_maps(self) -> list[Tensor]:
        """:attr:`maps` over the recording's positions only (the padding's cut)."""
        return [weights[..., : self.positions] for weights in self.maps]


@torch.no_grad()
def cross_attention(transcriber: Transcriber, wav_path: str | Path) -> CrossAttention:
    """The cross-attention of every decoder layer while it transcribes one recording.

    Raises:
        FileNotFoundError / DataError: as :class:`Transcriber`'s call.
        PretrainedError: longer than one window (one line), or no speech in it.
    """
    samples, _ = read_audio(wav_path, sample_rate=WHISPER_SAMPLE_RATE)
    if samples.shape[0] > transcriber.window_samples:
        seconds = samples.shape[0] / WHISPER_SAMPLE_RATE
        raise PretrainedError(
            f"{wav_path}: {seconds:.1f} s long; the attention of one window is drawn, at "
            f"most {transcriber.max_seconds:g} s (cut the recording)"
        )
    if float(abs(samples).max()) < SILENCE_PEAK:
        raise PretrainedError(f"{wav_path}: silent, no alignment to draw")
    model, tokenizer = transcriber.model, transcriber.tokenizer
    features = transcriber.features(samples)
    decoded = transcriber.attempts(samples)[-1].decoded  # with its fallback, if any
    if not decoded.ids or transcriber.checks.is_silence(decoded):
        raise PretrainedError(f"{wav_path}: no speech found, no alignment to draw")
    memory = model.encoder(features.unsqueeze(0))
    inputs = torch.tensor([transcriber.prefix + decoded.ids])
    maps = model.decoder.cross_attention(inputs, memory)
    first = len(transcriber.prefix) - 1  # the query that emits the first token
    names = [tokenizer.tokenizer.id_to_token(i) or str(i) for i in decoded.ids]
    frames = -(-samples.shape[0] // WHISPER_HOP)
    return CrossAttention(
        tokens=[name.replace("Ġ", " ") for name in names] + ["<|endoftext|>"],
        maps=[weights[0, :, first:] for weights in maps],
        positions=min(-(-frames // 2), memory.shape[1]),
        seconds_per_position=2 * WHISPER_HOP / WHISPER_SAMPLE_RATE,
        text=tokenizer.decode(decoded.ids),
    )
