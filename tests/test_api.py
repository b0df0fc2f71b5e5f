"""The Python API (:mod:`selfattn.api`): ``selfattn.train`` a tiny config for a step,
``selfattn.load`` it, predict, evaluate a split and a file (the numbers ``selfattn eval``
prints) and read its attention weights; ``selfattn.train`` works in any import order."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

import selfattn
from selfattn.api import Model, Run, configured
from selfattn.cli.main import main
from selfattn.config import load_config

from .cli.test_cli_own_data import reviews
from .helpers_cli import QUICK_TRAIN, TINY_MODEL, write_config
from .helpers_data import write_vector_sets

pytestmark = pytest.mark.usefixtures("one_thread")

SRC = Path(__file__).resolve().parents[1] / "src"


def tiny_config(folder: Path) -> Path:
    """A tiny sentiment model's config on made-up reviews, with a test file."""
    train = reviews(folder / "train.csv", 24)
    test = reviews(folder / "test.csv", 8, seed=1)
    return write_config(
        folder / "tiny.toml",
        run_dir=folder / "run",
        data={"dataset": train, "test": test, "batch_size": 8, "min_freq": 1},
        model=TINY_MODEL,
        train={**QUICK_TRAIN, "epochs": 1},
    )


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> tuple[Run, Path]:
    """A run trained for one step through the API, and its config."""
    folder = tmp_path_factory.mktemp("api")
    config = tiny_config(folder)
    run = selfattn.train(config, set={"train.max_steps": 1, "run_dir": folder / "api-run"})
    return run, config


def cli_eval(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    capsys.readouterr()
    assert main(["eval", *argv]) == 0
    report: dict[str, Any] = json.loads(capsys.readouterr().out)
    return report


def test_train_returns_the_run_with_its_folder_and_metrics(trained: tuple[Run, Path]) -> None:
    run, config = trained
    assert run.path == config.parent / "api-run" and (run.path / "best").is_dir()
    assert run.config.run_dir == run.path and run.config.train.max_steps == 1
    assert [line["epoch"] for line in run.history] == [1]
    assert run.metrics["step"] == 1 and 0.0 <= run.metrics["dev_accuracy"] <= 1.0
    lines = (run.path / "metrics.jsonl").read_text(encoding="utf-8").splitlines()
    assert json.loads(lines[-1])["train_loss"] == run.metrics["train_loss"]


def test_load_predicts_as_the_cli(
    trained: tuple[Run, Path], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    run, _ = trained
    model = selfattn.load(run.path)
    assert isinstance(model, Model) and model.task == "sequence" and model.input == "text"
    one = model.predict("a warm film")
    assert isinstance(one, str) and one.split("\t")[0] in ("pos", "neg")
    lines = tmp_path / "inputs.txt"
    lines.write_text("a warm film\na dull mess\n", encoding="utf-8")
    assert model.predict(["a warm film", "a dull mess"]) == model.predict(lines)
    capsys.readouterr()
    assert main(["predict", str(run.path), f"@{lines}"]) == 0
    assert capsys.readouterr().out.splitlines() == model.predict(lines)


def test_evaluate_a_split_and_a_file_gives_the_numbers_of_eval(
    trained: tuple[Run, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    run, config = trained
    model = run.load()
    test_file = config.parent / "test.csv"
    assert model.evaluate("test") == {
        k: v for k, v in cli_eval(capsys, str(run.path), "--split", "test").items() if k != "split"
    }
    from_file = cli_eval(capsys, str(run.path), "--data", str(test_file))
    assert from_file.pop("data") == str(test_file)
    assert model.evaluate(test_file) == from_file == run.evaluate(str(test_file))
    assert model.evaluate(test_file) == model.evaluate("test")  # the file is the test split
    dev = model.evaluate("dev")
    assert dev["count"] == run.metrics["dev_count"]
    assert dev["accuracy"] == pytest.approx(run.metrics["dev_accuracy"])


def test_evaluate_refuses_in_one_line(trained: tuple[Run, Path], tmp_path: Path) -> None:
    model = trained[0].load()
    with pytest.raises(ValueError, match=r"^format='csv' reads a file; 'test' is a split$"):
        model.evaluate("test", format="csv")
    with pytest.raises(ValueError, match=r"^test: no such file$"):
        model.evaluate(Path("test"))  # a Path is always a file
    bad = tmp_path / "bad.csv"
    bad.write_text("label,text\npos,a film\nmeh,a film\n", encoding="utf-8")
    with pytest.raises(ValueError, match=rf"^{bad}:3: label 'meh' is not one of this model's"):
        model.evaluate(bad)


def test_attention_weights_are_rows_that_sum_to_one(trained: tuple[Run, Path]) -> None:
    model = trained[0].load()
    [figure] = model.attention("a warm and funny film")
    assert figure.title == "self-attention"
    assert figure.queries == figure.keys == ["a", "warm", "and", "funny", "film"]
    assert len(figure.maps) == TINY_MODEL["num_layers"]
    for weights in figure.maps:
        assert weights.shape == (TINY_MODEL["num_heads"], 5, 5)
        torch.testing.assert_close(weights.sum(-1), torch.ones(2, 5))
    with pytest.raises(ValueError, match="2 inputs; attention reads one at a time"):
        model.attention(["a film", "a mess"])  # type: ignore[arg-type]


def test_a_config_object_or_values_take_set_like_a_file(tmp_path: Path) -> None:
    path = tiny_config(tmp_path)
    config = load_config(path)
    changes = {"train.epochs": 3, "model.dropout": 0.25, "data.dataset": "3", "run_dir": None}
    from_file = configured(path, [f"{k}={v}" for k, v in changes.items() if k != "data.dataset"])
    for built in (configured(path, []), configured(config, []), from_file):
        assert built.data.dataset == config.data.dataset
    api = selfattn.api
    overrides = [api.override(k, v) for k, v in changes.items() if k != "run_dir"]
    assert overrides == [
        "train.epochs=3",
        "model.dropout=0.25",
        'data.dataset="3"',  # a string stays a string
    ]
    built = configured(config, overrides)
    assert (built.train.epochs, built.model.dropout, built.data.dataset) == (3, 0.25, "3")
    with pytest.raises(ValueError, match="nope"):
        selfattn.train(path, set={"train.nope": 1})


def test_train_is_callable_before_and_after_its_submodules_are_imported(tmp_path: Path) -> None:
    """In a fresh interpreter ``selfattn.train`` is reached through ``selfattn`` first, then
    after ``import selfattn.train.loop`` rebinds the name to the package: both train."""
    config = tiny_config(tmp_path)
    script = f"""
import sys
import selfattn
assert "selfattn.train.loop" not in sys.modules and "selfattn.api" not in sys.modules
first = selfattn.train({str(config)!r}, set={{"train.max_steps": 1}}, log=None)
import selfattn.train.loop
from selfattn import train
assert train is selfattn.train is sys.modules["selfattn.train"]
second = selfattn.train({str(config)!r}, set={{"train.max_steps": 1}}, overwrite=True, log=None)
print(first.metrics["step"], second.metrics["step"], second.path)
"""
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(SRC), "OMP_NUM_THREADS": "1", "PATH": ""},
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["1", "1", str(tmp_path / "run")]
    import selfattn.train.loop  # here too, the name is the package

    assert callable(selfattn.train)


def test_a_vector_model_from_config_values_predicts_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Config values instead of a file; a model of vectors reads files (as ``predict``)."""
    sets = write_vector_sets(tmp_path / "sets.npz", 16)
    values = {
        "run_dir": str(tmp_path / "vectors"),
        "data": {"dataset": str(sets), "batch_size": 8, "dev_fraction": 0},
        "model": TINY_MODEL,
        "train": {**QUICK_TRAIN, "epochs": 1, "max_steps": 1},
    }
    model = selfattn.train(values, log=None).load()
    assert (model.task, model.input) == ("sequence", "vectors")
    one = tmp_path / "one.npz"
    np.savez(one, features=np.ones((4, 3), np.float32))
    capsys.readouterr()
    assert main(["predict", str(model.path), str(one)]) == 0
    assert model.predict(one) == capsys.readouterr().out.rstrip("\n")
    assert model.predict([one, str(one)]) == [model.predict(one)] * 2
    assert model.evaluate(sets)["count"] == 16
