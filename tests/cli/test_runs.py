"""``selfattn runs``: the runs under a folder side by side, as a table, JSON or learning
curves; a half-written run is one line, never a traceback."""

from __future__ import annotations

import contextlib
import io
import json
import shutil
from pathlib import Path

import pytest

from selfattn.cli.main import main
from selfattn.runs.table import TEST_FILE

from ..tiny_runs import train_config, write_reviews, write_tiny_config


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``runs/a`` (2 epochs) and ``runs/b`` (another learning rate and score; scored on
    a test split)."""
    folder = tmp_path_factory.mktemp("runs")
    config = write_tiny_config(folder, write_reviews(folder / "reviews.csv"), epochs=2)
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        assert train_config(config, folder / "runs" / "a", "train.tensorboard=false") == 0
        settings = ("train.lr=0.01", "model.score=dot", "train.tensorboard=false")
        assert train_config(config, folder / "runs" / "b", *settings) == 0
    (folder / "runs" / "b" / TEST_FILE).write_text('{"split": "test", "accuracy": 0.625}\n')
    return folder / "runs"


def metrics(run: Path) -> list[dict[str, float]]:
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]


def test_the_table_shows_what_differs_and_each_runs_results(
    runs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["runs", str(runs)]) == 0
    header, _, a, b = capsys.readouterr().out.strip().splitlines()
    assert header.split() == [
        "run", "task", "architecture", "model.score", "train.lr", "best", "dev", "test",
        "epochs", "time",
    ]  # fmt: skip
    assert a.split()[:5] == ["a", "sequence", "transformer", "scaled_dot", "0.0010"]
    assert b.split()[:5] == ["b", "sequence", "transformer", "dot", "0.0100"]
    assert "test" not in a.split()[5:] and "accuracy 0.6250" in b
    assert "2/2" in a and "2/2" in b
    last = metrics(runs / "a")[-1]
    best = next(line for line in metrics(runs / "a") if line["epoch"] == last["best_epoch"])
    assert f"accuracy {best['dev_accuracy']:.4f} (epoch {best['epoch']})" in a


def test_json_has_every_run(runs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["runs", str(runs), "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [run["run"] for run in listed] == ["a", "b"]
    a, b = listed
    assert a["fields"] == {"model.score": "scaled_dot", "train.lr": 0.001}
    assert a["epochs"] == 2 and a["finished"] and a["problem"] is None
    assert a["metric"] == "accuracy" and a["test"] is None
    assert b["test"] == {"split": "test", "accuracy": 0.625}
    assert a["seconds"] == pytest.approx(sum(line["seconds"] for line in metrics(runs / "a")))


def test_plot_draws_the_curves(
    runs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    picture = tmp_path / "curves.png"
    assert main(["runs", str(runs), "--plot", "-o", str(picture)]) == 0
    assert picture.read_bytes().startswith(b"\x89PNG")
    assert f"wrote {picture}" in capsys.readouterr().err


def test_a_half_written_run_is_one_line_and_nothing_is_lost(
    runs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "runs"
    shutil.copytree(runs, folder)
    no_manifest = folder / "c"
    no_manifest.mkdir()
    shutil.copy(runs / "a" / "config.toml", no_manifest / "config.toml")
    cut = folder / "b" / "metrics.jsonl"
    cut.write_text(cut.read_text() + '{"epoch": 3, "train_lo')
    before = {path: path.read_bytes() for path in folder.rglob("*") if path.is_file()}
    assert main(["runs", str(folder)]) == 2
    captured = capsys.readouterr()
    assert captured.out.strip().splitlines()[2].split()[0] == "a"  # the whole run is listed
    assert len(captured.out.strip().splitlines()) == 3
    assert captured.err.splitlines() == [
        f"selfattn runs: {folder / 'b'}: half-written: {cut}:3: a line cut short",
        f"selfattn runs: {no_manifest}: half-written: no checkpoint manifest (it stopped, "
        "or is, before its first save)",
    ]
    assert "Traceback" not in captured.err
    assert {path: path.read_bytes() for path in folder.rglob("*") if path.is_file()} == before


@pytest.mark.parametrize("name", ["missing", "file"])
def test_a_folder_without_runs_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    (tmp_path / "file").write_text("x")
    assert main(["runs", str(tmp_path / name)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"selfattn runs: error: {tmp_path / name}") and "\n" not in err
    assert main(["runs", str(tmp_path)]) == 2
    assert f"no runs under {tmp_path}" in capsys.readouterr().err
