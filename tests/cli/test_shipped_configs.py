"""Every shipped config loads its data within its own ``data.max_len`` (the default
``data.overlong = "refuse"`` would stop it otherwise), and its model is built for exactly
that length."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from selfattn.config import load_config
from selfattn.data.recipes import Recipe
from selfattn.tasks import prepare

from ..helpers_scripts import CONFIGS

SHIPPED = sorted(CONFIGS.glob("*.toml"))


@pytest.mark.slow
@pytest.mark.parametrize("path", SHIPPED, ids=[path.stem for path in SHIPPED])
def test_shipped_config_fits_its_max_len(path: Path, fetched: Callable[[str], Recipe]) -> None:
    config = load_config(path)
    fetched(config.data.dataset)  # CI fetches every recipe; only an unreachable one skips
    prepared = prepare(config)
    assert prepared.spec.max_len == config.data.max_len
    assert not prepared.notes  # recipes have their own dev split and nothing is cut
    prepared.task.build()  # and builds: no field it sets is refused (a pin included)
