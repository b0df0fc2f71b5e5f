"""What one decoding of a Whisper window found, and Whisper's checks of it (Radford et al.
2022, "Robust Speech Recognition via Large-Scale Weak Supervision", on long-form
transcription): the temperature fallback and the no-speech rule.

A decoding at temperature 0 (greedy, or beam search) can fail in two ways Whisper looks
for: it loops, repeating a phrase (its text compresses too well: a zlib compression ratio
above :data:`COMPRESSION_RATIO_THRESHOLD`), or it is unsure (its tokens' mean
log-probability is below :data:`LOG_PROB_THRESHOLD`). Either one sends the window to be
decoded again by sampling at a higher temperature (0.2, 0.4, … 1.0), and the first
decoding that passes is kept — the last one when none does. A window of no speech is not
retried: ``<|nocaptions|>`` more probable than :data:`NO_SPEECH_THRESHOLD` and a mean
log-probability below :data:`LOG_PROB_THRESHOLD` (the no-speech rule) give an empty
transcript.

>>> checks = DecodingChecks(compression_ratio=2.4, log_prob=-1.0, no_speech=0.6)
>>> checks.needs_fallback(decoded, "the the the the the the the the the the")
True
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Callable
from dataclasses import dataclass

__all__ = [
    "COMPRESSION_RATIO_THRESHOLD",
    "LOG_PROB_THRESHOLD",
    "NO_SPEECH_THRESHOLD",
    "Attempt",
    "Decoded",
    "DecodingChecks",
    "check_threshold",
    "compression_ratio",
    "fallback_temperatures",
]

#: Above this probability of ``<|nocaptions|>`` after ``<|startoftranscript|>``, a window
#: whose tokens average below :data:`LOG_PROB_THRESHOLD` holds no speech (Whisper's
#: ``no_speech_threshold`` and ``logprob_threshold``).
NO_SPEECH_THRESHOLD = 0.6
LOG_PROB_THRESHOLD = -1.0
#: A transcript whose text compresses by more than this is a loop (Whisper's
#: ``compression_ratio_threshold``).
COMPRESSION_RATIO_THRESHOLD = 2.4


@dataclass(frozen=True)
class Decoded:
    """What one decoding of one recording found.

    Attributes:
        ids: the emitted ids, ``<|endoftext|>`` not included.
        mean_log_prob: the mean log-probability of the emitted ids and ``<|endoftext|>``,
            each step's distribution renormalised over the tokens it may emit there
            (openai-whisper's and transformers' measure; before any temperature).
        no_speech: the probability of ``<|nocaptions|>`` after ``<|startoftranscript|>``
            (0.0 when the vocabulary has none).
    """

    ids: list[int]
    mean_log_prob: float
    no_speech: float

    @property
    def is_silence(self) -> bool:
        """Whisper's no-speech rule at its default thresholds (:class:`DecodingChecks`)."""
        return DecodingChecks().is_silence(self)


def compression_ratio(text: str) -> float:
    """``len(text) / len(zlib(text))`` in UTF-8 bytes (openai-whisper's measure): about 1
    for ordinary sentences, large for a phrase repeated over and over; 0.0 for ``""``."""
    data = text.encode("utf-8")
    return len(data) / len(zlib.compress(data)) if data else 0.0


def _number(value: float) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


#: Each threshold's range: its test and how a message says it.
_RANGES: dict[str, tuple[Callable[[float], bool], str]] = {
    "compression_ratio": (lambda value: value > 0, "> 0"),
    "log_prob": (lambda value: value <= 0, "<= 0"),
    "no_speech": (lambda value: 0 <= value <= 1, "in [0, 1]"),
}


def check_threshold(field: str, value: float, *, name: str | None = None) -> None:
    """Refuse a :class:`DecodingChecks` threshold outside its range, NaN or infinite.

    Args:
        field: the threshold (``"compression_ratio"``, ``"log_prob"``, ``"no_speech"``).
        value: its value.
        name: how the message names it (default: "the … threshold").

    Raises:
        ValueError: one line naming it, its range and the value.
    """
    test, words = _RANGES[field]
    if not (_number(value) and test(value)):
        shown = name or f"the {field.replace('_', ' ')} threshold"
        raise ValueError(f"{shown} must be {words}, got {value}")


@dataclass(frozen=True)
class DecodingChecks:
    """Whisper's thresholds on one decoding.

    Attributes:
        compression_ratio: a transcript compressing by more than this loops (> 0).
        log_prob: tokens whose mean log-probability is below this are unsure (≤ 0).
        no_speech: ``<|nocaptions|>`` more probable than this may be silence (in [0, 1]).

    Raises:
        ValueError: a threshold outside its range, NaN or infinite (one line).
    """

    compression_ratio: float = COMPRESSION_RATIO_THRESHOLD
    log_prob: float = LOG_PROB_THRESHOLD
    no_speech: float = NO_SPEECH_THRESHOLD

    def __post_init__(self) -> None:
        for field in _RANGES:
            check_threshold(field, getattr(self, field))

    def is_silence(self, decoded: Decoded) -> bool:
        """The no-speech rule: probably no speech, and no confident words."""
        return decoded.no_speech > self.no_speech and decoded.mean_log_prob < self.log_prob

    def needs_fallback(self, decoded: Decoded, text: str) -> bool:
        """Whether to decode again hotter: ``text`` (``decoded``'s) loops, or its tokens
        are unsure, and the window is not silence (which no temperature mends)."""
        failed = (
            compression_ratio(text) > self.compression_ratio
            or decoded.mean_log_prob < self.log_prob
        )
        return failed and not self.is_silence(decoded)


@dataclass(frozen=True)
class Attempt:
    """One decoding of a window: at ``temperature`` (0: the search asked for), what it
    found and its text."""

    temperature: float
    decoded: Decoded
    text: str


def fallback_temperatures(step: float = 0.2, *, name: str = "the temperature step") -> list[float]:
    """The temperatures of the fallback after 0: ``step``, 2·``step``, … up to 1.0
    (0.2 → [0.2, 0.4, 0.6, 0.8, 1.0]).

    Raises:
        ValueError: ``step`` outside (0, 1]: one line, ``name`` naming it.
    """
    if not (_number(step) and 0 < step <= 1):
        raise ValueError(f"{name} must be in (0, 1], got {step}")
    count = int(1.0 / step + 1e-6)
    return [round(step * n, 6) for n in range(1, count + 1)]
