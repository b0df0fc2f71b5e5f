"""Every shipped config loads its data within its own ``data.max_len`` (the default
``data.overlong = "refuse"`` would stop it otherwise), and its model is built for exactly
that length."""

from __future__ import annotations

from pathlib import Path

import pytest

from selfattn.data import RECIPES
from selfattn.train.config import load_config
from selfattn.train.pipeline import prepare

CONFIGS = sorted((Path(__file__).parents[2] / "configs").glob("*.toml"))


@pytest.mark.slow
@pytest.mark.parametrize("path", CONFIGS, ids=[path.stem for path in CONFIGS])
def test_shipped_config_fits_its_max_len(path: Path) -> None:
    config = load_config(path)
    recipe = RECIPES[config.data.dataset]
    if not recipe.is_fetched():
        pytest.skip(f"{recipe.name} is not fetched here (selfattn data fetch {recipe.name})")
    prepared = prepare(config)
    assert prepared.spec.max_len == config.data.max_len
    assert not prepared.notes  # recipes have their own dev split and nothing is cut
