"""Run folders to export, trained in seconds on files the fixtures write (one epoch of a
tiny model)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import torch

from selfattn.cli.main import main

from ..tiny_runs import write_reviews, write_tiny_config

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "checkpoints_v1"


def vector_sets(path: Path, count: int = 30) -> Path:
    """An ``.npz`` of sets of 2 to 9 vectors of 3 features, labelled by their mean's sign."""
    rng = np.random.default_rng(0)
    lengths = rng.integers(2, 10, size=count)
    features = rng.normal(size=(int(lengths.sum()), 3)).astype(np.float32)
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    labels = np.array(
        [
            "up" if features[s : s + n].mean() > 0 else "down"
            for s, n in zip(starts, lengths, strict=True)
        ]
    )
    np.savez(path, features=features, lengths=lengths, labels=labels)
    return path


def train_run(folder: Path, dataset: Path, *overrides: str) -> Path:
    """A tiny model trained for one epoch on ``dataset``; its run folder."""
    config = write_tiny_config(folder, dataset)
    sets = [arg for setting in overrides for arg in ("--set", setting)]
    threads = torch.get_num_threads()
    try:
        assert main(["train", str(config), "--no-progress", *sets]) == 0
    finally:
        torch.set_num_threads(threads)
    return folder / "run"


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
            write = write_reviews if kind == "reviews" else vector_sets
            data = write(folder / ("train.csv" if kind == "reviews" else "train.npz"))
            runs[key] = train_run(folder, data, *overrides)
        return runs[key]

    return make
