"""Fine-tuning a Whisper checkpoint on recordings and their transcripts.

A batch holds each recording's log-mel frames (:func:`encoder_samples`: padded with
zeros to ``encoder_seconds``, Whisper's 30 s by default, or to the batch's longest
recording if that is longer) and its target tokens: Whisper's task prefix
(``<|startoftranscript|> <|en|> <|transcribe|> <|notimestamps|>``), the transcript in
Whisper's byte-level BPE (with the leading space Whisper's transcripts start with), and
``<|endoftext|>``. The loss is the cross-entropy of the tokens after the prefix (the
transcript and ``<|endoftext|>``), teacher-forced: the prefix is given, never predicted.

>>> collate = WhisperCollator(WhisperTokenizer.from_folder(folder), model.config,
...                           encoder_seconds=4.0)
>>> batch = collate(examples)            # examples: (N, 1) 16 kHz samples, words as label
>>> loss = whisper_loss(model, batch)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from selfattn.datatypes import Example
from selfattn.models.spec import TaskSpec
from selfattn.pretrained.transcribe import WhisperTokenizer
from selfattn.pretrained.whisper import WhisperConfig, WhisperModel, load_whisper
from selfattn.specials import IGNORE_INDEX
from selfattn.speech.whisper_mel import WHISPER_HOP, WHISPER_SAMPLE_RATE, whisper_log_mel

__all__ = [
    "IGNORE",
    "FineTunedWhisper",
    "WhisperBatch",
    "WhisperCollator",
    "config_from_dict",
    "config_to_dict",
    "encoder_samples",
    "teacher_forced_metrics",
    "transcript_text",
    "whisper_loss",
]

#: The target id the loss skips (the prefix, the padding).
IGNORE = IGNORE_INDEX


def config_to_dict(config: WhisperConfig) -> dict[str, Any]:
    """A JSON-ready dict of ``config`` (what a run's checkpoint keeps: lists, not tuples,
    so that it equals itself read back)."""
    values = dataclasses.asdict(config)
    return {k: list(v) if isinstance(v, tuple) else v for k, v in values.items()}


def config_from_dict(values: dict[str, Any]) -> WhisperConfig:
    """The inverse of :func:`config_to_dict`."""
    fields: dict[str, Any] = dict(values)
    for name in ("suppress_tokens", "begin_suppress_tokens"):
        fields[name] = tuple(fields.get(name) or ())
    return WhisperConfig(**fields)


def transcript_text(example: Example) -> str:
    """What ``example`` says: its label's words joined by spaces."""
    label = example.label
    return label if isinstance(label, str) else " ".join(label)


def encoder_samples(longest: int, encoder_seconds: float | None, window: int) -> int:
    """How many samples each recording of a batch is padded to: ``encoder_seconds`` (or
    the ``window``, Whisper's 30 s, for ``None``), at least the ``longest`` recording,
    rounded up to a whole encoder position (20 ms), at most the window."""
    if encoder_seconds is None:
        return window
    step = 2 * WHISPER_HOP
    wanted = max(longest, round(encoder_seconds * WHISPER_SAMPLE_RATE))
    return min(window, -(-wanted // step) * step)


@dataclass
class WhisperBatch:
    """A batch for a Whisper model.

    Attributes:
        features: ``(B, n_mels, F)`` log-mel frames.
        tokens: ``(B, T)`` the decoder's inputs: prefix, transcript (padding after it
            repeats ``<|endoftext|>``).
        targets: ``(B, T)`` the next token at each input position; :data:`IGNORE` over
            the prefix (but its last position) and the padding.
        seconds: each recording's length in seconds.
    """

    features: Tensor
    tokens: Tensor
    targets: Tensor
    seconds: list[float]

    @property
    def labels(self) -> Tensor:
        """What the loss is the mean over: :attr:`targets` (the training loop counts them)."""
        return self.targets

    @property
    def num_tokens(self) -> int:
        """Encoder positions plus target tokens (for tokens/s)."""
        positions = (self.features.shape[-1] + 1) // 2
        return int(len(self) * positions + (self.targets != IGNORE).sum())

    def to(self, device: torch.device | str, *, non_blocking: bool = False) -> WhisperBatch:
        """The batch on ``device``."""
        features, tokens, targets = (
            t.to(device, non_blocking=non_blocking)
            for t in (self.features, self.tokens, self.targets)
        )
        return WhisperBatch(features, tokens, targets, self.seconds)

    def __len__(self) -> int:
        return int(self.tokens.shape[0])


class WhisperCollator:
    """Recordings with transcripts → :class:`WhisperBatch`.

    Args:
        tokenizer: the checkpoint's tokenizer.
        config: the checkpoint's sizes (mel bins, encoder and decoder positions).
        encoder_seconds: the encoder reads this many seconds (``None``: Whisper's 30).
        language: the language token of the task prefix.
    """

    def __init__(
        self,
        tokenizer: WhisperTokenizer,
        config: WhisperConfig,
        *,
        encoder_seconds: float | None = None,
        language: str = "en",
    ) -> None:
        self.tokenizer, self.config = tokenizer, config
        self.encoder_seconds = encoder_seconds
        self.prefix = tokenizer.prefix(language)

    @property
    def window(self) -> int:
        """The samples of Whisper's whole window (480,000: 30 s at 16 kHz)."""
        return 2 * self.config.max_source_positions * WHISPER_HOP

    @property
    def max_tokens(self) -> int:
        """The most transcript tokens a target holds: the decoder's positions less the
        prefix (``<|endoftext|>`` is a target only, never an input)."""
        return self.config.max_target_positions - len(self.prefix)

    def ids(self, text: str) -> list[int]:
        """The transcript's ids, with the leading space Whisper's transcripts have."""
        encoding = self.tokenizer.tokenizer.encode(" " + text.strip(), add_special_tokens=False)
        return [int(i) for i in encoding.ids]

    def features(self, samples: Sequence[Tensor]) -> Tensor:
        """``(B, n_mels, F)``: every recording padded to the same length
        (:func:`encoder_samples`)."""
        longest = max(int(s.shape[0]) for s in samples)
        size = encoder_samples(longest, self.encoder_seconds, self.window)
        n_mels = self.config.num_mel_bins
        return torch.stack([whisper_log_mel(s, n_mels=n_mels, num_samples=size) for s in samples])

    def __call__(self, examples: Sequence[Example]) -> WhisperBatch:
        """The batch of ``examples`` (features: ``(N, 1)`` 16 kHz samples).

        Raises:
            ValueError: a recording longer than the window, or a transcript longer than
                the decoder reads (one line naming the example).
        """
        samples = []
        for example in examples:
            assert example.features is not None
            wave = torch.as_tensor(example.features, dtype=torch.float32).flatten()
            if wave.shape[0] > self.window:
                raise ValueError(
                    f"{example.source}: {wave.shape[0] / WHISPER_SAMPLE_RATE:.1f} s long; the "
                    f"encoder reads at most {self.window / WHISPER_SAMPLE_RATE:g} s"
                )
            samples.append(wave)
        rows = [self.ids(transcript_text(e)) for e in examples]
        for example, row in zip(examples, rows, strict=True):
            if len(row) > self.max_tokens:
                raise ValueError(
                    f"{example.source}: the transcript is {len(row)} tokens; the decoder "
                    f"reads at most {self.max_tokens}"
                )
        eot, start = self.config.eot_id, len(self.prefix) - 1
        length = len(self.prefix) + max(len(r) for r in rows)
        tokens = torch.full((len(rows), length), eot, dtype=torch.long)
        targets = torch.full((len(rows), length), IGNORE, dtype=torch.long)
        for i, row in enumerate(rows):
            full = [*self.prefix, *row, eot]
            tokens[i, : len(full) - 1] = torch.tensor(full[:-1])
            targets[i, start : len(full) - 1] = torch.tensor(full[start + 1 :])
        seconds = [s.shape[0] / WHISPER_SAMPLE_RATE for s in samples]
        return WhisperBatch(self.features(samples), tokens, targets, seconds)


class FineTunedWhisper(WhisperModel):
    """A Whisper model that knows its run's :class:`TaskSpec` (what a checkpoint stores
    to rebuild it).

    Args:
        config: the checkpoint's sizes.
        spec: the run's task spec.
    """

    def __init__(self, config: WhisperConfig, spec: TaskSpec) -> None:
        super().__init__(config)
        self.spec = spec

    @classmethod
    def from_pretrained(cls, folder: Path, spec: TaskSpec) -> FineTunedWhisper:
        """The checkpoint in ``folder`` (:func:`load_whisper`'s checks), in training mode."""
        loaded = load_whisper(folder)
        model = cls(loaded.config, spec)
        model.load_state_dict(loaded.state_dict())
        return model.train()


def whisper_loss(model: WhisperModel, batch: WhisperBatch, label_smoothing: float = 0.0) -> Tensor:
    """Mean cross-entropy of the transcript tokens and ``<|endoftext|>``, teacher-forced."""
    logits = model(batch.features, batch.tokens)
    return F.cross_entropy(
        logits.flatten(0, 1),
        batch.targets.flatten(),
        ignore_index=IGNORE,
        label_smoothing=label_smoothing,
    )


@torch.no_grad()
def teacher_forced_metrics(
    model: WhisperModel, batches: Iterable[WhisperBatch], device: torch.device | str | None = None
) -> dict[str, float]:
    """``loss`` (per target token) and ``accuracy`` (of the next token, teacher-forced)
    over ``batches``, the model in eval mode (put back as it was)."""
    was_training = model.training
    model.eval()
    total = correct = 0
    loss = 0.0
    try:
        for batch in batches:
            if device is not None:
                batch = batch.to(device)
            logits = model(batch.features, batch.tokens)
            kept = batch.targets != IGNORE
            loss += float(
                F.cross_entropy(
                    logits[kept], batch.targets[kept], reduction="sum", ignore_index=IGNORE
                )
            )
            correct += int((logits[kept].argmax(-1) == batch.targets[kept]).sum())
            total += int(kept.sum())
    finally:
        model.train(was_training)
    return {"loss": loss / max(total, 1), "accuracy": correct / max(total, 1)}
