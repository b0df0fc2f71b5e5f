"""Every shipped config loads its data within its own ``data.max_len`` (the default
``data.overlong = "refuse"`` would stop it otherwise), and its model is built for exactly
that length; one on a user's files reads those its docs say how to write."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from selfattn.config import load_config
from selfattn.data.recipes import Recipe
from selfattn.tasks import prepare

from ..helpers_pretrained import fetched_weights
from ..helpers_scripts import CONFIGS, load_script
from ..pretrained.whisper_fixtures import fetched_recordings

#: Configs whose data are a user's files rather than a recipe.
ON_USER_FILES = {"recordings_whisper"}
SHIPPED = sorted(p for p in CONFIGS.glob("*.toml") if p.stem not in ON_USER_FILES)


@pytest.mark.slow
@pytest.mark.parametrize("path", SHIPPED, ids=[path.stem for path in SHIPPED])
def test_shipped_config_fits_its_max_len(path: Path, fetched: Callable[[str], Recipe]) -> None:
    config = load_config(path)
    fetched(config.data.dataset)  # CI fetches every recipe; only an unreachable one skips
    prepared = prepare(config)
    assert prepared.spec.max_len == config.data.max_len
    assert not prepared.notes  # recipes have their own dev split and nothing is cut
    prepared.task.build()  # and builds: no field it sets is refused (a pin included)


@pytest.mark.slow
def test_the_recordings_config_reads_the_csv_files_its_script_writes(tmp_path: Path) -> None:
    fetched_recordings()  # or a skip saying why they cannot be fetched here
    fetched_weights("whisper-base")
    script = load_script("benchmarks/whisper_csv.py")
    script.write(tmp_path, espeak=0, seed=0)
    config = load_config(
        CONFIGS / "recordings_whisper.toml",
        [f"data.dataset={tmp_path / 'train.csv'}", f"data.test={tmp_path / 'test.csv'}"],
    )
    prepared = prepare(config)
    assert (len(prepared.splits.train), len(prepared.splits.test)) == (5, 5)
    train_files = {e.source.split(":")[0] for e in prepared.splits.train}
    assert train_files == {str(tmp_path / "train.csv")}
    # The held-out recordings are other recordings than the training ones.
    read = {e.features.tobytes() for e in prepared.splits.train if e.features is not None}
    assert not read & {e.features.tobytes() for e in prepared.splits.test if e.features is not None}
    [note] = prepared.notes  # no dev set: said once, nothing else
    assert "without dev evaluation" in note, note
    assert prepared.spec.max_len == config.data.max_len
    prepared.task.build()
