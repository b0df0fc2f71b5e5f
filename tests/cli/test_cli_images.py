"""Image tasks from the command line: the shipped ViT and CNN configs train a few steps."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from selfattn.cli.main import main
from selfattn.data import RECIPES, DataError

from ..helpers_cli import set_flags
from ..helpers_scripts import CONFIGS

#: Small models and little data, so that each run is a few steps.
TINY = [
    "train.epochs=1",
    "train.threads=1",
    "train.warmup_steps=2",
    "model.embed_dim=16",
    "model.num_layers=1",
    "model.ffn_dim=16",
]


def _train(config: str, run_dir: Path, *overrides: str) -> int:
    settings = set_flags(*TINY, f"run_dir={json.dumps(str(run_dir))}", *overrides)
    return main(["train", str(CONFIGS / config), "--no-progress", "--overwrite", *settings])


@pytest.mark.parametrize(
    ("config", "overrides"),
    [
        ("digits_vit.toml", ()),
        ("digits_vit.toml", ("model.patch_size=none", 'model.grid_positional="learned2d"')),
        ("digits_cnn.toml", ()),
    ],
    ids=["vit-patches", "pixels-learned2d", "cnn2d"],
)
def test_digits_train_and_eval(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], config: str, overrides: tuple[str, ...]
) -> None:
    run_dir = tmp_path / "run"
    assert _train(config, run_dir, "data.train_fraction=0.25", *overrides) == 0
    assert "digits: 315 train / 179 dev / 359 test" in capsys.readouterr().out
    assert main(["eval", str(run_dir), "--split", "test"]) == 0
    metrics = json.loads(capsys.readouterr().out)
    assert metrics["count"] == 359 and 0.0 <= metrics["accuracy"] <= 1.0


@pytest.mark.parametrize("task", ["mnist_5k", "fashion_mnist"])
@pytest.mark.parametrize("model", ["vit", "cnn"])
def test_28x28_tasks_train_a_few_steps(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], task: str, model: str
) -> None:
    try:
        RECIPES[task.replace("_", "-")].fetch()
    except DataError as err:
        pytest.skip(f"{task}: its data cannot be fetched here ({err})")
    overrides = ["data.train_fraction=0.01", "model.num_layers=1"]
    overrides += ["model.patch_size=7"] if model == "vit" else ["model.embed_dim=4"]
    assert _train(f"{task}_{model}.toml", tmp_path / "run", *overrides) == 0
    assert "best epoch 1" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (("model.patch_size=3",), "3 × 3 patches do not tile a 8 × 8 image"),
        (('model.positional="sinusoidal"',), 'set model.positional = "none"'),
        (('data.dataset="speaker-jv"',), "need image data"),
    ],
)
def test_image_mistakes_are_one_line_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], overrides: tuple[str, ...], message: str
) -> None:
    if "speaker-jv" in overrides[0]:
        try:
            RECIPES["speaker-jv"].fetch()
        except DataError as err:
            pytest.skip(f"speaker-jv: its data cannot be fetched here ({err})")
    assert _train("digits_vit.toml", tmp_path / "run", *overrides) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and message in err
