"""Run folders to export, trained in seconds on files the fixtures write (one epoch of a
tiny model)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from ..helpers_data import write_vector_sets
from ..tiny_runs import train_config, write_reviews, write_tiny_config

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "checkpoints_v1"


RunMaker = Callable[..., Path]


@pytest.fixture(scope="session")
def trained(tmp_path_factory: pytest.TempPathFactory) -> RunMaker:
    """``trained(kind, *overrides)``: a run folder of a text (``"reviews"``) or vector
    (``"vectors"``) sequence model, trained once per session per set of overrides."""
    runs: dict[tuple[str, ...], Path] = {}

    def make(kind: str, *overrides: str) -> Path:
        key = (kind, *overrides)
        if key not in runs:
            folder = tmp_path_factory.mktemp(kind)
            write = write_reviews if kind == "reviews" else write_vector_sets
            data = write(folder / ("train.csv" if kind == "reviews" else "train.npz"))
            assert train_config(write_tiny_config(folder, data), folder / "run", *overrides) == 0
            runs[key] = folder / "run"
        return runs[key]

    return make
