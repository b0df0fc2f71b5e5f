"""The spoken-digit recipes as recordings rather than speech vectors, for a model with a
front end of its own (a pretrained Whisper reads its log-mels of the 16 kHz samples).

The utterances are the recipes' own (:func:`~selfattn.data.recipes.speech.plan` and
:func:`~selfattn.data.recipes.speech.render`: the same voices, text, delivery and noise),
split by voice the same way, so a model fine-tuned on ``digit-strings-espeak`` here is
scored on the test voices the scratch recipe is scored on. The samples are synthesised
once and cached as 16-bit integers with one scale per utterance
(``CACHE/generated/waves-KEY.npz``).

Each example's ``features`` are the ``(N, 1)`` float32 samples at 16 kHz; its label is the
recipe's (the digits, or one word).
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
from tqdm import tqdm

from selfattn.data.fetch.cache import atomic_output, cache_root
from selfattn.data.recipes.espeak import Espeak
from selfattn.data.recipes.speech import (
    DIGIT_STRINGS_SPEC,
    DIGITS_SPEC,
    SpokenSpec,
    plan,
    render,
    split_by_voice,
)
from selfattn.data.registry import RECIPES
from selfattn.datatypes import DatasetSplits, Example

__all__ = ["WAVE_RECIPES", "cached_waves", "spoken_waves"]

#: The recipes whose recordings can be had, and how they are synthesised.
WAVE_RECIPES: dict[str, SpokenSpec] = {
    "digits-espeak": DIGITS_SPEC,
    "digit-strings-espeak": DIGIT_STRINGS_SPEC,
}


def cached_waves(spec: SpokenSpec, paths: list[Path]) -> list[np.ndarray]:
    """The ``(N,)`` float32 16 kHz samples of every utterance of ``plan(spec)``,
    synthesised once (espeak-ng from ``paths``) and cached."""
    path = cache_root() / "generated" / f"waves-{spec.key()}.npz"
    if not path.is_file():
        espeak = Espeak(paths)
        utterances = plan(spec)
        with ThreadPoolExecutor(max_workers=min(4, os.cpu_count() or 1)) as pool:
            rendered = pool.map(lambda u: render(espeak, u), utterances)
            waves = list(tqdm(rendered, total=len(utterances), desc="espeak-ng", disable=None))
        scales = np.array([max(float(np.abs(w).max()), 1e-12) / 32767 for w in waves])
        ints = [np.round(w / s).astype(np.int16) for w, s in zip(waves, scales, strict=True)]
        path.parent.mkdir(parents=True, exist_ok=True)
        with atomic_output(path) as out:
            lengths = np.array([len(w) for w in ints])
            np.savez(out, samples=np.concatenate(ints), lengths=lengths, scales=scales)
    with np.load(path) as stored:
        samples, lengths, scales = stored["samples"], stored["lengths"], stored["scales"]
    pieces = np.split(samples, np.cumsum(lengths)[:-1])
    return [
        (piece.astype(np.float32) * np.float32(scale))
        for piece, scale in zip(pieces, scales, strict=True)
    ]


def spoken_waves(name: str) -> DatasetSplits:
    """The recordings of the spoken-digit recipe ``name``, split as the recipe splits.

    Raises:
        KeyError: ``name`` is not one of :data:`WAVE_RECIPES`.
        DataError: espeak-ng cannot be fetched.
    """
    spec = WAVE_RECIPES[name]
    recipe = RECIPES[name]
    utterances = plan(spec)
    waves = cached_waves(spec, recipe.fetch())
    examples = [
        Example(None, wave[:, None], u.label, f"{name}/{u.voice}/{i}: {u.text}")
        for i, (u, wave) in enumerate(zip(utterances, waves, strict=True))
    ]
    return recipe.splits(*split_by_voice(examples, [u.voice for u in utterances]))
