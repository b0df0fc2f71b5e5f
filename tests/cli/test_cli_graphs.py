"""Each graph task trains a few steps and evaluates from the command line."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from selfattn.cli.main import main
from selfattn.data.recipes import Recipe

from ..helpers_cli import QUICK_TRAIN, TINY_MODEL, set_flags, write_config

#: A 2-layer graph Transformer, no positional encoding (a graph's nodes have no order).
MODEL = {
    "architecture": "graph",
    **TINY_MODEL,
    "num_layers": 2,
    "dropout": None,
    "positional": "none",
}


def _config(tmp_path: Path, dataset: str) -> Path:
    return write_config(
        tmp_path / f"{dataset}.toml",
        run_dir=tmp_path / "run",
        data={"dataset": dataset, "batch_size": 32},
        model=MODEL,
        train={**QUICK_TRAIN, "epochs": 2},
    )


@pytest.mark.parametrize(
    ("dataset", "metric", "overrides"),
    [
        ("karate", "accuracy", []),
        ("solubility", "accuracy", ["data.train_fraction=0.2"]),
        ("solubility-logs", "rmse", ["train.epochs=1"]),
    ],
)
def test_graph_task_trains_and_evaluates(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    dataset: str,
    metric: str,
    overrides: list[str],
    fetched: Callable[[str], Recipe],
) -> None:
    fetched(dataset)
    config = _config(tmp_path, dataset)
    assert main(["train", str(config), "--no-progress", *set_flags(*overrides)]) == 0
    assert f"dev {metric}" in capsys.readouterr().out
    assert main(["eval", str(tmp_path / "run"), "--split", "test"]) == 0
    metrics = json.loads(capsys.readouterr().out)
    assert metric in metrics and metrics["count"] > 0
    if dataset == "karate":
        assert metrics["count"] == 18  # only the test members are scored
