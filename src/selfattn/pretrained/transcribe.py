"""Speech to text with a Whisper checkpoint: a recording in, its transcript out.

The decoder starts from Whisper's task prefix — ``<|startoftranscript|>``, the language
(``<|en|>``), ``<|transcribe|>``, ``<|notimestamps|>`` — and emits the most probable token
at each step (greedy) until ``<|endoftext|>``, with a
:class:`~selfattn.attention.cache.DecoderCache`: one new position per step, the
encoder's keys and values projected once. The checkpoint's suppressed tokens are never
emitted, and its "begin" ones (a blank, ``<|endoftext|>``) not first, as Whisper decodes.

Whisper reads 30 s at a time: a longer recording is refused in one line naming its length
and the option (``chunk``) that cuts it into windows at quiet moments instead.
A silent recording (no sample louder than :data:`SILENCE_PEAK`) has an empty transcript,
and so has one where Whisper's own no-speech rule holds: ``<|nocaptions|>`` more probable
than :data:`NO_SPEECH_THRESHOLD` after the start token, and the emitted tokens' mean
log-probability below :data:`LOG_PROB_THRESHOLD` (noise). With a ``fallback``, a window
whose transcript loops or is unsure is decoded again at higher temperatures
(:mod:`.fallback`).

>>> transcribe("whisper-base", "recording.wav")
'He was not an ill-disposed young man.'
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from tokenizers import Tokenizer
from torch import Tensor

from selfattn.attention.cache import DecoderCache
from selfattn.data.readers.audio import read_audio
from selfattn.pretrained.ct2_whisper import WHISPER_SPECIALS
from selfattn.pretrained.errors import PretrainedError
from selfattn.pretrained.fallback import (
    LOG_PROB_THRESHOLD,
    NO_SPEECH_THRESHOLD,
    Attempt,
    Decoded,
    DecodingChecks,
)
from selfattn.pretrained.weights import pretrained_folder
from selfattn.pretrained.whisper import WhisperModel, load_whisper
from selfattn.speech.alignment import error_rate
from selfattn.speech.whisper_mel import (
    WHISPER_HOP,
    WHISPER_SAMPLE_RATE,
    whisper_log_mel,
)

__all__ = [
    "LOG_PROB_THRESHOLD",
    "NO_SPEECH_THRESHOLD",
    "SILENCE_PEAK",
    "Decoded",
    "SearchFn",
    "Transcriber",
    "WhisperTokenizer",
    "chunk_bounds",
    "greedy_tokens",
    "transcribe",
    "transcript_words",
    "word_error_rate",
]

#: A recording whose loudest sample stays below this (−60 dBFS) is silent: its transcript is
#: empty without running the model, which on digital silence says "you" with confidence.
SILENCE_PEAK = 1e-3


@dataclass(frozen=True)
class WhisperTokenizer:
    """A Whisper ``tokenizer.json``: the byte-level BPE and the special tokens' ids.

    Attributes:
        tokenizer: the ``tokenizers`` tokenizer.
        eot_id: ``<|endoftext|>``; every id from it on is special (tasks, languages,
            timestamps) and never printed.
        start_id, transcribe_id, no_timestamps_id: the task prefix's tokens.
        no_speech_id: ``<|nocaptions|>`` (``<|nospeech|>`` in later vocabularies), or
            ``None``.
    """

    tokenizer: Tokenizer
    eot_id: int
    start_id: int
    transcribe_id: int
    no_timestamps_id: int
    no_speech_id: int | None

    @classmethod
    def from_folder(cls, folder: Path) -> WhisperTokenizer:
        """Read ``folder/tokenizer.json``.

        Raises:
            PretrainedError: missing, unreadable, or without Whisper's special tokens.
        """
        path = folder / "tokenizer.json"
        try:
            tokenizer = Tokenizer.from_file(str(path))
        except Exception as error:  # tokenizers raises a bare Exception for a bad file
            reason = "missing" if not path.is_file() else f"not a tokenizer.json ({error})"
            raise PretrainedError(f"{path}: {reason}") from None
        return cls.from_tokenizer(tokenizer, str(path))

    @classmethod
    def from_tokenizer(cls, tokenizer: Tokenizer, path: str = "tokenizer") -> WhisperTokenizer:
        """A loaded tokenizer (``path`` names it in errors), its special tokens looked up.

        Raises:
            PretrainedError: without Whisper's special tokens.
        """
        ids = [tokenizer.token_to_id(name) for name in WHISPER_SPECIALS]
        missing = [name for name, i in zip(WHISPER_SPECIALS, ids, strict=True) if i is None]
        if missing:
            raise PretrainedError(f"{path}: lacks Whisper's special tokens {missing}")
        no_speech = tokenizer.token_to_id("<|nocaptions|>")
        if no_speech is None:
            no_speech = tokenizer.token_to_id("<|nospeech|>")
        eot, start, task, no_timestamps = (int(i) for i in ids if i is not None)
        return cls(tokenizer, eot, start, task, no_timestamps, no_speech)

    def language_id(self, language: str) -> int:
        """The id of ``<|language|>`` (``"en"`` → 50259).

        Raises:
            PretrainedError: the vocabulary has no such language token.
        """
        token_id = self.tokenizer.token_to_id(f"<|{language}|>")
        if token_id is None:
            raise PretrainedError(f"no language token <|{language}|> in this Whisper vocabulary")
        return int(token_id)

    def prefix(self, language: str = "en") -> list[int]:
        """The task prefix: start of transcript, language, transcribe, no timestamps."""
        return [
            self.start_id,
            self.language_id(language),
            self.transcribe_id,
            self.no_timestamps_id,
        ]

    def decode(self, ids: list[int]) -> str:
        """The text of ``ids``, special tokens (every id ≥ ``<|endoftext|>``) left out."""
        return str(self.tokenizer.decode([i for i in ids if i < self.eot_id])).strip()


def _suppression(model: WhisperModel, ids: tuple[int, ...]) -> Tensor:
    """``(V,)`` True at ``ids`` (those inside the vocabulary)."""
    mask = torch.zeros(model.config.vocab_size, dtype=torch.bool)
    mask[[i for i in ids if 0 <= i < mask.shape[0]]] = True
    return mask


@torch.no_grad()
def greedy_tokens(
    model: WhisperModel,
    features: Tensor,
    prefix: list[int],
    *,
    max_new_tokens: int | None = None,
    no_speech_id: int | None = None,
) -> Decoded:
    """Greedy decoding of one recording from ``prefix`` until ``<|endoftext|>``.

    Args:
        model: the Whisper model, in eval mode.
        features: ``(n_mels, F)`` log-mel frames of one recording.
        prefix: the task prefix's ids.
        max_new_tokens: most tokens emitted (default: as many as the decoder's positions
            leave after the prefix).
        no_speech_id: ``<|nocaptions|>``, whose probability after the start token is
            returned.

    Returns:
        The ids, their mean log-probability and the probability of no speech.
    """
    config = model.config
    room = config.max_target_positions - len(prefix)
    max_new_tokens = room if max_new_tokens is None else min(max_new_tokens, room)
    memory = model.encoder(features.unsqueeze(0))  # (1, S, E)
    cache = DecoderCache(capacity=len(prefix) + max_new_tokens)
    logits = model.decoder(torch.tensor([prefix]), memory, cache=cache)[0]  # (T, V)
    no_speech = 0.0
    if no_speech_id is not None:
        no_speech = float(logits[0].softmax(-1)[no_speech_id])
    logits = logits[-1]
    suppress = _suppression(model, config.suppress_tokens)
    first = suppress | _suppression(model, config.begin_suppress_tokens)
    emitted: list[int] = []
    log_prob = 0.0
    for step in range(max_new_tokens):
        # Renormalised over the tokens it may emit, as Whisper measures the log-probability.
        allowed = logits.masked_fill(first if step == 0 else suppress, float("-inf"))
        token = int(allowed.argmax())
        log_prob += float(allowed.log_softmax(-1)[token])
        if token == config.eot_id:
            break
        emitted.append(token)
        if step + 1 < max_new_tokens:
            logits = model.decoder(torch.tensor([[token]]), memory, cache=cache)[0, -1]
    return Decoded(emitted, log_prob / max(1, len(emitted) + 1), no_speech)


#: How a :class:`Transcriber` decodes one recording: the model, its ``(n_mels, F)``
#: log-mel frames, the task prefix and ``<|nocaptions|>``'s id → what it found. Greedy
#: here (:func:`greedy_search`); beam search and sampling in :mod:`selfattn.decoding.whisper`.
SearchFn = Callable[[WhisperModel, Tensor, list[int], int | None], Decoded]


def greedy_search(
    model: WhisperModel, features: Tensor, prefix: list[int], no_speech_id: int | None
) -> Decoded:
    """:func:`greedy_tokens` as a :data:`SearchFn`."""
    return greedy_tokens(model, features, prefix, no_speech_id=no_speech_id)


class Transcriber:
    """A loaded Whisper checkpoint and its tokenizer, to transcribe many recordings.

    Args:
        folder_or_name: ``"whisper-base"`` or a Hugging Face Whisper folder.
        language: the language token of the task prefix (``"en"``).
        search: how each recording is decoded (default greedy).
        chunk: transcribe a recording longer than one window (30 s) window by window,
            cut at quiet moments (:func:`chunk_bounds`), and join the transcripts; without
            it such a recording is refused.
        encoder_window: the encoder's self-attention reads only |i − j| ≤ this many
            positions (20 ms each) around each one (``None``: all;
            :meth:`~selfattn.pretrained.whisper.WhisperEncoder.use_window`).
        encoder_seconds: the encoder reads this many seconds (the recording zero-padded
            to it; a longer one whole) instead of Whisper's 30 s window: fewer positions,
            less time. Reading only the recording's frames makes whisper-base repeat
            itself; 15 s gave the 30 s word error rates (docs/whisper.md).
        fallback: Whisper's temperature fallback: ``(temperature, search)`` pairs tried
            in turn while the last decoding fails ``checks``
            (:meth:`~.fallback.DecodingChecks.needs_fallback`); ``()``: none.
        checks: the thresholds of the fallback and of the no-speech rule.

    Raises:
        PretrainedError: not a Whisper folder, a tensor missing or mis-shaped, or a
            tokenizer without Whisper's special tokens (one line).
        ValueError: a negative ``encoder_window``, ``encoder_seconds`` ≤ 0.
    """

    def __init__(
        self,
        folder_or_name: str | Path,
        *,
        language: str = "en",
        search: SearchFn = greedy_search,
        chunk: bool = False,
        encoder_window: int | None = None,
        encoder_seconds: float | None = None,
        fallback: Sequence[tuple[float, SearchFn]] = (),
        checks: DecodingChecks | None = None,
    ) -> None:
        if encoder_window is not None and encoder_window < 0:
            raise ValueError(f"the encoder's window must be at least 0, got {encoder_window}")
        if encoder_seconds is not None and not encoder_seconds > 0:
            raise ValueError(f"encoder_seconds must be > 0, got {encoder_seconds}")
        self.encoder_seconds = encoder_seconds
        folder = pretrained_folder(folder_or_name)
        self.search, self.chunk = search, chunk
        self.fallback, self.checks = list(fallback), checks or DecodingChecks()
        self.folder = folder
        self.tokenizer = WhisperTokenizer.from_folder(folder)
        self.prefix = self.tokenizer.prefix(language)
        self.model = load_whisper(folder)
        self.model.encoder.use_window(encoder_window)

    @property
    def max_seconds(self) -> float:
        """The longest recording the encoder reads at once (30 s for Whisper)."""
        return self.window_samples / WHISPER_SAMPLE_RATE

    @property
    def window_samples(self) -> int:
        """The samples of one window the encoder reads (480,000: 30 s at 16 kHz)."""
        return 2 * self.model.config.max_source_positions * WHISPER_HOP

    def __call__(self, wav_path: str | Path) -> str:
        """The transcript of one WAV or FLAC recording (any rate: resampled to 16 kHz).

        Raises:
            FileNotFoundError: no such file.
            DataError: not an audio file, or one with no samples (one line).
            PretrainedError: longer than :attr:`max_seconds` without ``chunk`` (one line
                naming its length and the option).
        """
        samples, _ = read_audio(wav_path, sample_rate=WHISPER_SAMPLE_RATE)
        return self.transcribe_samples(samples, source=str(wav_path))

    def transcribe_samples(self, samples: np.ndarray, *, source: str = "recording") -> str:
        """The transcript of ``(N,)`` 16 kHz samples; ``source`` names them in errors.

        Raises:
            PretrainedError: longer than :attr:`max_seconds` without ``chunk``.
        """
        window = self.window_samples
        if samples.shape[0] <= window:
            return self._window(samples)
        if not self.chunk:
            seconds = samples.shape[0] / WHISPER_SAMPLE_RATE
            raise PretrainedError(
                f"{source}: {seconds:.1f} s long; Whisper reads at most {self.max_seconds:g} s "
                "at a time (--chunk, or chunk=True, transcribes it window by window)"
            )
        texts = [self._window(samples[a:b]) for a, b in chunk_bounds(samples, window)]
        return " ".join(text for text in texts if text)

    def features(self, samples: np.ndarray) -> Tensor:
        """``(n_mels, F)`` the log-mel frames the encoder reads of at most one window of
        samples: the window, zero-padded, or with ``encoder_seconds`` that many seconds
        (at least the recording, rounded up to a whole encoder position of 20 ms)."""
        num_samples = self.window_samples
        if self.encoder_seconds is not None:
            wanted = max(samples.shape[0], round(self.encoder_seconds * WHISPER_SAMPLE_RATE))
            step = 2 * WHISPER_HOP
            num_samples = min(num_samples, -(-wanted // step) * step)
        return whisper_log_mel(
            samples, n_mels=self.model.config.num_mel_bins, num_samples=num_samples
        )

    def attempts(self, samples: np.ndarray) -> list[Attempt]:
        """Every decoding of at most one window of samples: by the search, then by the
        fallback's while the last one fails the checks; the last is the one kept."""
        features, no_speech_id = self.features(samples), self.tokenizer.no_speech_id
        attempts: list[Attempt] = []
        for temperature, search in [(0.0, self.search), *self.fallback]:
            decoded = search(self.model, features, self.prefix, no_speech_id)
            attempts.append(Attempt(temperature, decoded, self.tokenizer.decode(decoded.ids)))
            if not self.checks.needs_fallback(decoded, attempts[-1].text):
                break
        return attempts

    def _window(self, samples: np.ndarray) -> str:
        """The transcript of at most one window of samples."""
        if float(abs(samples).max()) < SILENCE_PEAK:
            return ""
        kept = self.attempts(samples)[-1]
        return "" if self.checks.is_silence(kept.decoded) else kept.text


def chunk_bounds(
    samples: np.ndarray, window: int, *, search: int | None = None, frame: int = 320
) -> list[tuple[int, int]]:
    """Where to cut a recording longer than ``window`` samples: each piece at most a window
    long, each cut in the quietest ``frame`` (20 ms) of the last ``search`` samples of its
    window (default a sixth: 5 s of 30), so that a cut falls between words.

    Returns:
        ``[(start, end), …]`` consecutive pieces covering every sample.
    """
    search = window // 6 if search is None else min(search, window)
    bounds: list[tuple[int, int]] = []
    start, total = 0, samples.shape[0]
    while total - start > window:
        low = start + window - search
        frames = search // frame
        cut = start + window
        if frames:
            region = np.asarray(samples[low : low + frames * frame], dtype=np.float64)
            energy = (region.reshape(frames, frame) ** 2).mean(axis=1)
            cut = low + int(energy.argmin()) * frame + frame // 2
        bounds.append((start, cut))
        start = cut
    bounds.append((start, total))
    return bounds


#: What a transcript writes short and references spell out (a small part of Whisper's
#: English text normaliser): titles, and the numbers up to twenty.
_NUMBERS = [
    "zero",
    "one",
    "two",
    "three",
    "four",
    "five",
    "six",
    "seven",
    "eight",
    "nine",
    "ten",
    "eleven",
    "twelve",
    "thirteen",
    "fourteen",
    "fifteen",
    "sixteen",
    "seventeen",
    "eighteen",
    "nineteen",
    "twenty",
]
_SPELLED_OUT = {
    "mr": "mister",
    "mrs": "missus",
    "dr": "doctor",
    **{str(n): word for n, word in enumerate(_NUMBERS)},
}


def transcript_words(text: str) -> list[str]:
    """The words of a transcript as references write them: lower case, hyphenated words
    split, punctuation dropped, ``Mr.`` → ``mister``, ``10`` → ``ten``."""
    words = re.sub(r"[^a-z0-9' ]+", " ", text.lower().replace("-", " ")).split()
    return [_SPELLED_OUT.get(word, word) for word in words]


def word_error_rate(hypotheses: Sequence[str], references: Sequence[str]) -> float:
    """Σ word edit distance / Σ reference words, over :func:`transcript_words`."""
    return error_rate(hypotheses, references, transcript_words)


def transcribe(folder_or_name: str | Path, wav_path: str | Path, *, language: str = "en") -> str:
    """The transcript of one recording by a Whisper checkpoint (greedy, no timestamps).

    Args:
        folder_or_name: ``"whisper-base"`` (fetched and converted on first use) or a
            Hugging Face Whisper folder.
        wav_path: a WAV or FLAC file of at most 30 s, any sample rate.
        language: the language token of the task prefix.

    Returns:
        The text, stripped; ``""`` for a recording without speech.

    Raises:
        PretrainedError / DataError: as :class:`Transcriber` and its call (one line each).
    """
    return Transcriber(folder_or_name, language=language)(wav_path)
