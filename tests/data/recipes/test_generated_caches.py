"""The generated speech caches are written whole or not at all, and read back as made."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from selfattn.data.fetch.cache import CACHE_ENV
from selfattn.data.recipes import speech


def test_spoken_vectors_are_cached_atomically(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(CACHE_ENV, str(tmp_path))
    made = [np.full((n, 3), n, dtype=np.float32) for n in (2, 5)]
    monkeypatch.setattr(speech, "generate", lambda spec, espeak: [(None, v) for v in made])
    spec = speech.SpokenSpec.__new__(speech.SpokenSpec)
    monkeypatch.setattr(speech.SpokenSpec, "key", lambda self: "probe")
    read = speech.cached_features(spec, lambda: None)  # type: ignore[arg-type,return-value]
    assert [v.tolist() for v in read] == [v.tolist() for v in made]
    assert [p.name for p in (tmp_path / "generated").iterdir()] == ["spoken-probe.npz"]

    def half_written(out: object, **arrays: object) -> None:
        out.write(b"PK\x03\x04")  # type: ignore[attr-defined]
        raise OSError("disk full")

    monkeypatch.setattr(np, "savez", half_written)
    monkeypatch.setattr(speech.SpokenSpec, "key", lambda self: "broken")
    with pytest.raises(OSError, match="disk full"):
        speech.cached_features(spec, lambda: None)  # type: ignore[arg-type,return-value]
    assert [p.name for p in (tmp_path / "generated").iterdir()] == ["spoken-probe.npz"]
