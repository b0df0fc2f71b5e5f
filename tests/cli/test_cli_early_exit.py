"""Early exit from the command line: a model with exit heads trains, saves, loads and
resumes; ``eval --exit-threshold`` and ``--exit-sweep`` report and draw; their mistakes
are one line and exit status 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from selfattn.cli.main import main
from selfattn.models.early_exit import EarlyExitModel
from selfattn.tasks import Predictor

from ..tiny_runs import train_config, write_reviews, write_tiny_config

LAYERS = 3
EXITS = ("model.exit_heads=true",)


def _config(folder: Path) -> Path:
    return write_tiny_config(folder, write_reviews(folder / "reviews.csv", 60), num_layers=LAYERS)


def _weights(run_dir: Path) -> dict[str, torch.Tensor]:
    (path,) = (run_dir / "last").glob("model-*.safetensors")
    return load_file(path)


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("exit")
    run_dir = folder / "run"
    assert train_config(_config(folder), run_dir, "train.epochs=3", *EXITS) == 0
    return run_dir


def _eval(capsys: pytest.CaptureFixture[str], run_dir: Path, *flags: str) -> dict[str, float]:
    capsys.readouterr()
    assert main(["eval", str(run_dir), "--split", "dev", "--threads", "1", *flags]) == 0
    return json.loads(capsys.readouterr().out)


def test_a_checkpoint_with_exit_heads_loads_with_them(trained: Path) -> None:
    predictor = Predictor(trained)
    assert isinstance(predictor.model, EarlyExitModel)
    assert len(predictor.model.exits) == LAYERS - 1
    assert any(name.startswith("exits.") for name in _weights(trained))


def test_eval_at_thresholds_zero_and_above_one(
    trained: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plain = _eval(capsys, trained)
    first = _eval(capsys, trained, "--exit-threshold", "0")
    assert first["mean_layers"] == 1.0 and first["num_layers"] == LAYERS
    full = _eval(capsys, trained, "--exit-threshold", "1.5", "--exit-criterion", "entropy")
    assert full["mean_layers"] == LAYERS and full["exit_criterion"] == "entropy"
    assert full["accuracy"] == pytest.approx(plain["accuracy"])
    assert full["full_depth_accuracy"] == pytest.approx(plain["accuracy"])
    assert full["count"] == plain["count"]
    assert full["seconds_per_example"] > 0 and full["time_ratio"] > 0


def test_the_sweep_prints_the_curve_and_draws_it(
    trained: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    assert main(["eval", str(trained), "--split", "dev", "--exit-sweep", "--threads", "1"]) == 0
    out = capsys.readouterr().out
    assert "threshold  accuracy  mean blocks" in out
    assert "fixed depth: 1: " in out and "with the fewest blocks: T = " in out
    assert (trained / "exit_sweep_dev.png").read_bytes()[:4] == b"\x89PNG"
    *table, last = out.splitlines()
    values = json.loads(last)  # the line a record reads: the table's numbers, flat
    assert values["split"] == "dev" and values["exit_criterion"] == "max-prob"
    row = next(line.split() for line in table if line.split()[:1] == ["0.7"])
    assert row[1:] == [f"{values['accuracy_T0.7']:.4f}", f"{values['blocks_T0.7']:.3f}"]
    assert values["blocks_T0"] == 1 and values["blocks_T1"] == LAYERS
    assert f"1: {values['accuracy_block1']:.4f}" in out
    assert values[f"accuracy_block{LAYERS}"] == values["accuracy_T1"]
    image = tmp_path / "curve.png"
    flags = ["--exit-sweep", "--exit-criterion", "entropy", "-o", str(image)]
    assert main(["eval", str(trained), "--split", "dev", *flags]) == 0
    assert f"wrote {image}" in capsys.readouterr().out
    assert image.read_bytes()[:4] == b"\x89PNG"


def test_a_resumed_run_ends_as_an_uninterrupted_one(tmp_path: Path) -> None:
    config = _config(tmp_path)
    straight, resumed = tmp_path / "straight", tmp_path / "resumed"
    same = (*EXITS, "model.exit_loss_weights=linear", 'train.schedule="constant"')
    assert train_config(config, straight, "train.epochs=2", *same) == 0
    assert train_config(config, resumed, "train.epochs=1", *same) == 0
    with pytest.warns(UserWarning, match="resuming with changed settings train.epochs"):
        assert train_config(config, resumed, "train.epochs=2", *same, resume=True) == 0
    a, b = _weights(straight), _weights(resumed)
    assert a.keys() == b.keys() and any(name.startswith("exits.") for name in a)
    for name in a:
        torch.testing.assert_close(a[name], b[name], rtol=0, atol=0, msg=name)


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--exit-threshold", "-0.5"], "--exit-threshold must be >= 0"),
        (["--exit-threshold", "nan"], "--exit-threshold must be >= 0"),
        (
            ["--exit-criterion", "entropy"],
            "--exit-criterion needs --exit-threshold T or --exit-sweep",
        ),
        (["--exit-threshold", "0.5", "-o", "x.png"], "-o needs --exit-sweep"),
        (["--exit-threshold", "0.5", "--beam", "2"], "decoding options are for seq2seq models"),
    ],
)
def test_bad_exit_options_are_one_line_errors(
    trained: Path, flags: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    assert main(["eval", str(trained), "--split", "dev", *flags]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_a_model_without_exit_heads_refuses_a_threshold(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_dir = tmp_path / "plain"
    assert train_config(_config(tmp_path), run_dir) == 0
    capsys.readouterr()
    for flag in ("--exit-threshold=0.9", "--exit-sweep"):
        assert main(["eval", str(run_dir), "--split", "dev", flag]) == 2
        err = capsys.readouterr().err
        assert "has no exit heads" in err and "model.exit_heads=true" in err
        assert err.count("\n") == 1
