"""Each graph task trains a few steps and evaluates from the command line."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from selfattn.cli.main import main
from selfattn.data.recipes import Recipe


def _config(tmp_path: Path, dataset: str) -> Path:
    config = tmp_path / f"{dataset}.toml"
    config.write_text(
        f"""run_dir = "{tmp_path / "run"}"

[data]
dataset = "{dataset}"
batch_size = 32

[model]
architecture = "graph"
embed_dim = 16
num_heads = 2
num_layers = 2
ffn_dim = 32
positional = "none"

[train]
epochs = 2
lr = 3e-3
warmup_steps = 2
seed = 0
threads = 1
device = "cpu"
""",
        encoding="utf-8",
    )
    return config


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
    sets = [arg for override in overrides for arg in ("--set", override)]
    assert main(["train", str(config), "--no-progress", *sets]) == 0
    assert f"dev {metric}" in capsys.readouterr().out
    assert main(["eval", str(tmp_path / "run"), "--split", "test"]) == 0
    metrics = json.loads(capsys.readouterr().out)
    assert metric in metrics and metrics["count"] > 0
    if dataset == "karate":
        assert metrics["count"] == 18  # only the test members are scored
