"""Spoken digits synthesised with Debian's espeak-ng, and a user's folder of WAV files.

No spoken-digit corpus can be had from a package registry, so the recipes make one: the
espeak-ng speech synthesiser (Debian ``espeak-ng``, fetched with ``apt-get download`` and
run from the cache, no installation or root needed) says the words "zero" … "nine" in
many voices — 8 English accents × 12 voice variants (``en-us+f2``: US English, second
female variant) — each utterance with its own speaking rate, pitch, leading and trailing
silence and white noise at a random signal-to-noise ratio, all drawn from a seeded
generator, so the same seed gives the same data on every machine. The waves go through
:func:`~selfattn.speech.frontend.speech_vectors` (40 log-mels, normalised, 3 frames
stacked) and the vectors are cached as one ``.npz``: only the first load synthesises.

The splits are by voice, so the test speakers are never heard in training: the variants
``m3`` and ``f2`` (in all 8 accents) are the test voices, ``m6`` and ``f4`` the dev
voices, the other 8 variants the training voices.

* ``digits-espeak`` (sequence task): one word → which digit.
* ``digit-strings-espeak`` (seq2seq): 3-5 digits spoken in one breath → the digits.

A user's own recordings train the same way: a CSV whose header is ``path,label``, one WAV
file a row, read by :func:`selfattn.data.readers.wav_csv.read_wav_csv`.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
from tqdm import tqdm

from selfattn.data.fetch.cache import atomic_output, cache_root
from selfattn.data.recipes.espeak import ACCENTS, ESPEAK_SOURCE, ESPEAK_VERSION, VARIANTS, Espeak
from selfattn.data.registry import Recipe, register
from selfattn.datatypes import DatasetSplits, Example

WORDS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")
DEV_VARIANTS = ("m6", "f4")
TEST_VARIANTS = ("m3", "f2")

# --------------------------------------------------------------------------- generation


@dataclass(frozen=True)
class SynthesisSpec:
    """What every espeak-ng recipe draws its utterances from; a recipe's spec adds what
    its utterances say.

    Attributes:
        per_voice: utterances per voice.
        speed: words a minute, drawn uniformly (espeak-ng's default: 175).
        pitch: espeak-ng pitch 0-99, drawn uniformly (default 50).
        snr_db: signal-to-noise ratio of the added white noise, drawn uniformly.
        pad_ms: silence (noise only) added before and after, each drawn uniformly.
        accents, variants: the voices are every accent with every variant.
        seed: utterance i of voice (a, v) comes from the generator seeded
            ``[seed, a, v, i]``, whatever else is generated.
    """

    #: What else shapes the data (the front end, a label map), hashed into :meth:`key`:
    #: changed whenever the same fields would give other data.
    SALT: ClassVar[str] = ""

    per_voice: int
    speed: tuple[int, int] = (130, 220)
    pitch: tuple[int, int] = (25, 75)
    snr_db: tuple[float, float] = (10.0, 30.0)
    pad_ms: tuple[int, int] = (0, 150)
    accents: tuple[str, ...] = ACCENTS
    variants: tuple[str, ...] = VARIANTS
    seed: int = 0

    def key(self) -> str:
        """A short hash of the spec, the synthesiser and :attr:`SALT`: the cache file's
        name."""
        text = repr(sorted(asdict(self).items())) + ESPEAK_VERSION + self.SALT
        return hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class SpokenSpec(SynthesisSpec):
    """How a spoken-digits dataset is synthesised: the fields of :class:`SynthesisSpec`
    and how many digits an utterance says.

    Attributes:
        digits: ``(shortest, longest)`` digit strings; ``None``: one word an utterance,
            each word ``per_voice / 10`` times.
    """

    SALT: ClassVar[str] = "frontend-v1"

    digits: tuple[int, int] | None = None


@dataclass(frozen=True)
class Utterance:
    """What one generated utterance says and how: its voice and text, and the delivery
    :func:`delivery` drew for it."""

    voice: str
    text: str
    speed: int
    pitch: int
    snr_db: float
    pad: tuple[int, int]  # ms before, after
    noise_seed: int


@dataclass(frozen=True)
class DigitUtterance(Utterance):
    """An utterance of digits and its label: a digit, or (seq2seq) the digits in order."""

    label: tuple[str, ...] | str


def delivery(rng: np.random.Generator, ranges: SynthesisSpec) -> dict[str, Any]:
    """How one utterance is said: ``speed``, ``pitch``, ``snr_db``, ``pad`` (ms before,
    after) and ``noise_seed``, drawn from ``rng`` in this order, which the generated
    recipes' contents depend on."""
    return {
        "speed": int(rng.integers(ranges.speed[0], ranges.speed[1] + 1)),
        "pitch": int(rng.integers(ranges.pitch[0], ranges.pitch[1] + 1)),
        "snr_db": float(rng.uniform(*ranges.snr_db)),
        "pad": (
            int(rng.integers(ranges.pad_ms[0], ranges.pad_ms[1] + 1)),
            int(rng.integers(ranges.pad_ms[0], ranges.pad_ms[1] + 1)),
        ),
        "noise_seed": int(rng.integers(2**32)),
    }


def plan(spec: SpokenSpec) -> list[DigitUtterance]:
    """Every utterance of ``spec``, voice by voice (accents outer, variants inner)."""
    out = []
    for a, accent in enumerate(spec.accents):
        for v, variant in enumerate(spec.variants):
            for i in range(spec.per_voice):
                rng = np.random.default_rng([spec.seed, a, v, i])
                label: tuple[str, ...] | str
                if spec.digits is None:
                    label = text = WORDS[i % len(WORDS)]
                else:
                    length = int(rng.integers(spec.digits[0], spec.digits[1] + 1))
                    digits = [int(d) for d in rng.integers(0, 10, size=length)]
                    label = tuple(str(d) for d in digits)
                    text = " ".join(WORDS[d] for d in digits)
                out.append(
                    DigitUtterance(
                        voice=f"{accent}+{variant}",
                        label=label,
                        text=text,
                        **delivery(rng, spec),
                    )
                )
    return out


def render(espeak: Espeak, utterance: Utterance) -> np.ndarray:
    """One utterance as 16 kHz samples: synthesised, resampled, padded, with noise."""
    from selfattn.speech.features import SAMPLE_RATE, resample

    samples, rate = espeak.synthesize(
        utterance.text, utterance.voice, speed=utterance.speed, pitch=utterance.pitch
    )
    return padded_with_noise(resample(samples, rate, SAMPLE_RATE), utterance)


def padded_with_noise(samples: np.ndarray, utterance: Utterance) -> np.ndarray:
    """16 kHz ``samples`` with the utterance's silence before and after, and white noise
    at its signal-to-noise ratio over the whole, as float32."""
    from selfattn.speech.features import SAMPLE_RATE

    before, after = (SAMPLE_RATE * ms // 1000 for ms in utterance.pad)
    samples = np.pad(samples, (before, after))
    power = float(np.mean(samples.astype(np.float64) ** 2))
    noise = np.random.default_rng(utterance.noise_seed).standard_normal(len(samples))
    noise *= np.sqrt(power / 10 ** (utterance.snr_db / 10))
    return (samples + noise).astype(np.float32)


def generate(spec: SpokenSpec, espeak: Espeak) -> list[tuple[DigitUtterance, np.ndarray]]:
    """Synthesise every utterance of ``spec``: ``(utterance, (L, 120) vectors)`` pairs."""
    from selfattn.speech.features import SAMPLE_RATE
    from selfattn.speech.frontend import speech_vectors

    utterances = plan(spec)
    # espeak-ng runs as a subprocess: threads keep a few of them busy at once, and map()
    # returns the results in the plan's order whatever order they finish in.
    with ThreadPoolExecutor(max_workers=min(4, os.cpu_count() or 1)) as pool:
        rendered = pool.map(lambda u: render(espeak, u), utterances)
        # disable=None hides the bar when stderr is not a terminal (tests, logs).
        waves = list(tqdm(rendered, total=len(utterances), desc="espeak-ng", disable=None))
    return [(u, speech_vectors(w, SAMPLE_RATE)) for u, w in zip(utterances, waves, strict=True)]


def cached_features(spec: SpokenSpec, espeak: Callable[[], Espeak]) -> list[np.ndarray]:
    """The vectors of every utterance of ``plan(spec)``, generated once and cached in
    ``CACHE/generated/spoken-KEY.npz`` (written atomically)."""
    path = cache_root() / "generated" / f"spoken-{spec.key()}.npz"
    if not path.is_file():
        vectors = [features for _, features in generate(spec, espeak())]
        lengths = np.array([len(v) for v in vectors])
        path.parent.mkdir(parents=True, exist_ok=True)
        with atomic_output(path) as out:
            np.savez(out, features=np.concatenate(vectors), lengths=lengths)
    with np.load(path) as stored:
        features, lengths = stored["features"], stored["lengths"]
    return np.split(features, np.cumsum(lengths)[:-1])


def split_by_voice(
    examples: list[Example], voices: list[str]
) -> tuple[list[Example], list[Example], list[Example]]:
    """Train / dev / test by the voice's variant (:data:`DEV_VARIANTS`, :data:`TEST_VARIANTS`)."""
    parts: tuple[list[Example], list[Example], list[Example]] = ([], [], [])
    for example, voice in zip(examples, voices, strict=True):
        variant = voice.split("+")[1]
        parts[2 if variant in TEST_VARIANTS else 1 if variant in DEV_VARIANTS else 0].append(
            example
        )
    return parts


def spoken_builder(spec: SpokenSpec) -> Callable[[Recipe, list[Path]], DatasetSplits]:
    """The builder of a spoken-digits recipe: cached vectors, split by voice."""

    def build(recipe: Recipe, paths: list[Path]) -> DatasetSplits:
        utterances = plan(spec)
        vectors = cached_features(spec, lambda: Espeak(paths))
        examples = [
            Example(None, v, u.label, f"{recipe.name}/{u.voice}/{i}: {u.text}")
            for i, (u, v) in enumerate(zip(utterances, vectors, strict=True))
        ]
        return recipe.splits(*split_by_voice(examples, [u.voice for u in utterances]))

    return build


DIGITS_SPEC = SpokenSpec(per_voice=30)
DIGIT_STRINGS_SPEC = SpokenSpec(per_voice=30, digits=(3, 5))
_SPLITS = (
    f"Split by voice: variants {' and '.join(TEST_VARIANTS)} of every accent are the test "
    f"voices, {' and '.join(DEV_VARIANTS)} the dev voices, the other "
    f"{len(VARIANTS) - 4} the training voices"
)
_VOICES = (
    f"{len(ACCENTS)} English accents × {len(VARIANTS)} voice variants of espeak-ng, each "
    "utterance at its own rate (130-220 words a minute) and pitch, with 0-150 ms of "
    "silence either side and white noise at 10-30 dB SNR (seed 0); 40 log-mels every "
    "10 ms, normalised per utterance, 3 frames stacked (120-vectors every 30 ms)"
)


def _sizes(spec: SpokenSpec) -> str:
    """``train / dev / test`` utterance counts of ``spec``."""
    per_variant = spec.per_voice * len(spec.accents)
    held_out = len(DEV_VARIANTS) * per_variant  # as many test as dev voices
    train = (len(spec.variants) - 2 * len(DEV_VARIANTS)) * per_variant
    return f"{train:,} / {held_out:,} / {held_out:,}"


_LICENCE = "generated with espeak-ng (GPL-3+); the generated audio has no restrictions"
_NUM_VOICES = len(ACCENTS) * len(VARIANTS)

register(
    Recipe(
        name="digits-espeak",
        task="sequence",
        input="vectors",
        description=(
            f"Spoken digits: one word 'zero'-'nine' → the word (10 classes). {_VOICES}. "
            f"{DIGITS_SPEC.per_voice} words per voice, {DIGITS_SPEC.per_voice * _NUM_VOICES:,} "
            f"in all. {_SPLITS} ({_sizes(DIGITS_SPEC)})."
        ),
        source=ESPEAK_SOURCE,
        licence=_LICENCE,
        build=spoken_builder(DIGITS_SPEC),
    ),
    Recipe(
        name="digit-strings-espeak",
        task="seq2seq",
        input="vectors",
        description=(
            "Spoken digit strings: 3-5 digits said in one breath ('three five one') → "
            f"the digits (3 5 1). {_VOICES}. {DIGIT_STRINGS_SPEC.per_voice} strings per "
            f"voice, {DIGIT_STRINGS_SPEC.per_voice * _NUM_VOICES:,} in all. {_SPLITS} "
            f"({_sizes(DIGIT_STRINGS_SPEC)})."
        ),
        source=ESPEAK_SOURCE,
        licence=_LICENCE,
        build=spoken_builder(DIGIT_STRINGS_SPEC),
    ),
)
