"""``selfattn sweep``: a grid × seeds trained by worker processes, summarised over seeds,
resumable; every bad grid refused before any run starts."""

from __future__ import annotations

import contextlib
import io
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from selfattn.cli.main import main
from selfattn.runs.sweep_grid import plan
from selfattn.runs.table import TEST_FILE, read_run

from ..helpers_cli import one_line_error
from ..helpers_locks import lock_is_free, locked_by_another
from ..tiny_runs import write_reviews, write_tiny_config

JOBS = str(min(2, os.cpu_count() or 1))  # --jobs is refused above the core count
GRID = ["--grid", "model.score=dot,additive", "--grid", "model.normalizer=softmax,relu"]
NAMES = [
    f"score={score}_normalizer={normalizer}_seed=0"
    for score in ("dot", "additive")
    for normalizer in ("softmax", "relu")
]


def tiny_config(folder: Path) -> Path:
    """A config of 2 steps an epoch, 1 epoch, with a test file of 10 reviews."""
    config = write_tiny_config(folder, write_reviews(folder / "reviews.csv"))
    test = write_reviews(folder / "test.csv", 10)
    text = config.read_text(encoding="utf-8")
    config.write_text(text.replace("max_len = 48\n", f'max_len = 48\ntest = "{test}"\n'))
    return config


@pytest.fixture(scope="module")
def swept(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, str, int]:
    """A 2 × 2 grid, one seed, trained two at a time: (config, sweep folder, stdout, exit
    status). Module-wide, so it has no capsys: its output is caught here."""
    folder = tmp_path_factory.mktemp("sweep")
    config = tiny_config(folder)
    out = folder / "out"
    stdout = io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(io.StringIO()):
        code = main(["sweep", str(config), *GRID, "--seeds", "0", "--jobs", JOBS, "-o", str(out)])
    return config, out, stdout.getvalue(), code


def test_every_combination_is_a_run_and_the_table_averages_them(
    swept: tuple[Path, Path, str, int],
) -> None:
    _, out, table, code = swept
    assert code == 0
    records = {name: read_run(out / name) for name in NAMES}
    for name, record in records.items():
        assert record.problem is None, name
        assert record.finished and (out / name / TEST_FILE).is_file()
        assert (out / "logs" / f"{name}.log").is_file()
    assert records[NAMES[1]].config["model.normalizer"] == "relu"
    assert records[NAMES[2]].config["model.score"] == "additive"
    assert records[NAMES[0]].config["train.threads"] == 1
    header, _, *rows = table.strip().splitlines()
    assert header.split()[:3] == ["score", "normalizer", "seeds"]
    assert "dev accuracy" in header and "test accuracy" in header
    assert len(rows) == 4
    summary = json.loads((out / "summary.json").read_text())
    for row in summary["rows"]:
        values = row["values"]
        name = f"score={values['model.score']}_normalizer={values['model.normalizer']}_seed=0"
        best = records[name].best
        assert best is not None
        assert row["metrics"]["dev accuracy"]["mean"] == pytest.approx(best["dev_accuracy"])
        assert row["metrics"]["dev accuracy"]["std"] is None  # one seed
        test = json.loads((out / name / TEST_FILE).read_text())
        assert row["metrics"]["test accuracy"]["mean"] == pytest.approx(test["accuracy"])
        keyed = summary["combinations"][f"{values['model.score']}-{values['model.normalizer']}"]
        assert keyed["test_accuracy"]["mean"] == pytest.approx(test["accuracy"])
        assert keyed["dev_accuracy"]["mean"] == pytest.approx(best["dev_accuracy"])
        # what the run cost, read from its metrics.jsonl: the epochs' seconds added up
        assert keyed["train_seconds"]["mean"] == pytest.approx(records[name].seconds)
        assert records[name].seconds > 0
    assert header.split()[-2:] == ["train", "seconds"]
    timing = summary["timing"]
    assert timing["runs_trained"] == 4
    # two at a time: the wall clock is shorter than the runs' own times added up
    assert 0 < timing["wall_seconds"] < timing["run_seconds"] or JOBS == "1"
    assert (out / "sweep.png").stat().st_size > 0


def test_running_it_again_skips_the_finished_runs(
    swept: tuple[Path, Path, str, int], capsys: pytest.CaptureFixture[str]
) -> None:
    config, out, table, _ = swept
    before = {name: (out / name / "metrics.jsonl").read_text() for name in NAMES}
    assert main(["sweep", str(config), *GRID, "--seeds", "0", "--jobs", JOBS, "-o", str(out)]) == 0
    captured = capsys.readouterr()
    assert captured.err.count(": skipped") == 4
    assert captured.out == table
    assert "trained in" not in captured.err  # nothing trained: no timing line
    summary = json.loads((out / "summary.json").read_text())
    assert summary["timing"]["runs_trained"] == 0
    # the runs' cost stays: it is read from them, not from the invocation that trained them
    assert all(c["train_seconds"]["mean"] > 0 for c in summary["combinations"].values())
    assert {name: (out / name / "metrics.jsonl").read_text() for name in NAMES} == before


def test_an_interrupted_run_is_resumed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tiny_config(tmp_path)
    out = tmp_path / "out"
    name = "score=dot_seed=0"
    # Ctrl-C during the member's first step (as the sweep's SIGINT does): `last` is saved.
    monkeypatch.setattr(
        "selfattn.train.progress.StopOnSignal.__enter__",
        lambda self: setattr(self, "requested", True) or self,
    )
    member = [
        "--set", "model.score=dot", "--set", "train.seed=0", "--set", "train.threads=1",
        "--set", f"run_dir={out / name}",
    ]  # fmt: skip
    assert main(["train", str(config), "--no-progress", *member]) == 130
    monkeypatch.undo()
    assert read_run(out / name).state["step"] == 1
    capsys.readouterr()
    argv = ["sweep", str(config), "--grid", "model.score=dot", "--seeds", "0", "-o", str(out)]
    assert main(argv) == 0
    assert f"{name}: resumed" in capsys.readouterr().err
    record = read_run(out / name)
    assert record.finished and record.state["step"] == 2
    assert "resuming" in (out / "logs" / f"{name}.log").read_text()


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        (["--grid", "model.kernel_size=3,5"], "unknown key(s) model.kernel_size"),
        (["--grid", "model.score=dot,3"], "(model.score=3, seed 0): model.score: expected str"),
        (["--grid", "model.num_heads=2,x"], "model.num_heads: expected int, got 'x'"),
        (["--grid", "model.window_k=5"], "model.window_k: architecture 'transformer' does not"),
        (["--grid", "model.score"], "is not of the form section.field=value1,value2"),
        (["--grid", "model.score=dot,dot"], "dot given twice"),
        (["--grid", "train.seed=1,2"], "give the seeds with --seeds"),
        (["--seeds", "0,x"], "'x' is not a seed"),
        (["--jobs", "0"], "--jobs 0: give 1 to"),
        (["--set", "run_dir=elsewhere"], "a sweep names its runs' folders"),
    ],
)  # fmt: skip
def test_a_bad_sweep_is_refused_before_any_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], arguments: list[str], expected: str
) -> None:
    config = tiny_config(tmp_path)
    out = tmp_path / "out"
    error = one_line_error(capsys, ["sweep", str(config), *arguments, "-o", str(out)])
    assert error.startswith("selfattn sweep: error: ")
    assert expected in error
    assert not out.exists()


def test_an_architecture_the_files_task_does_not_take_is_refused_before_any_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A user's CSV says its task type only when read: the sweep reads it once, before any
    # run starts, instead of letting every rnn run start and fail.
    config = tiny_config(tmp_path)
    text = config.read_text(encoding="utf-8").replace("num_heads = 2\n", "")
    config.write_text(text, encoding="utf-8")
    out = tmp_path / "out"
    argv = ["sweep", str(config), "--grid", "model.architecture=bigru,rnn", "-o", str(out)]
    error = one_line_error(capsys, argv)
    assert "--grid (model.architecture=rnn, seed 0): model.architecture = 'rnn' is for the" in error
    assert "not a sequence task" in error
    assert not out.exists()


def test_a_folder_of_another_configs_runs_is_refused(
    swept: tuple[Path, Path, str, int], capsys: pytest.CaptureFixture[str]
) -> None:
    config, out, _, _ = swept
    argv = ["sweep", str(config), *GRID, "--seeds", "0", "--set", "train.lr=0.01", "-o", str(out)]
    error = one_line_error(capsys, argv)
    assert f"{out} holds the runs of another config" in error
    assert "train.lr = 0.0010, this sweep has 0.0100" in error


def test_a_folder_another_sweep_is_filling_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The same sweep started twice (two terminals, a script run again) would train every
    # unfinished member twice into the same folders.
    config = tiny_config(tmp_path)
    out = tmp_path / "out"
    argv = ["sweep", str(config), *GRID, "--seeds", "0", "-o", str(out)]
    with locked_by_another(out):
        error = one_line_error(capsys, argv)
    assert f"{out} is in use by a sweep in another process (process 4242)" in error
    assert sorted(p.name for p in out.iterdir()) == [".lock"]  # nothing trained or written
    assert lock_is_free(out)


def test_a_folder_may_hold_a_sweep_of_other_fields_of_the_same_config(
    swept: tuple[Path, Path, str, int],
) -> None:
    config, out, _, _ = swept
    sweep = plan(config, ["model.include_self=true,false"], [0], [], out, 1)
    assert [member.name for member in sweep.members] == [
        "include_self=true_seed=0",
        "include_self=false_seed=0",
    ]


def test_ctrl_c_leaves_the_runs_resumable(tmp_path: Path) -> None:
    config = tiny_config(tmp_path)
    out = tmp_path / "out"
    name = "score=dot_seed=0"
    command = [
        sys.executable, "-m", "selfattn", "sweep", str(config), "--grid", "model.score=dot",
        "--seeds", "0", "--set", "train.epochs=100000", "-o", str(out),
    ]  # fmt: skip
    sweep = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # Ctrl-C's default action, even where this test runs with SIGINT ignored (a
        # background job): Python then turns it into KeyboardInterrupt.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    log = out / "logs" / f"{name}.log"
    deadline = time.monotonic() + 240
    while not (log.is_file() and "epoch 2/" in log.read_text()):  # a checkpoint is saved
        assert sweep.poll() is None and time.monotonic() < deadline
        time.sleep(0.1)
    sweep.send_signal(signal.SIGINT)
    _, err = sweep.communicate(timeout=240)
    assert sweep.returncode == 130
    assert err.splitlines()[-1] == (
        "selfattn sweep: interrupted; every run was left resumable: run the same command "
        "again to go on"
    )
    record = read_run(out / name)
    assert record.problem is None and not record.finished and record.state["epoch"] >= 2
    assert f"checkpoint saved in {out / name / 'last'}" in log.read_text()
