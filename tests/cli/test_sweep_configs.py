"""``selfattn sweep A.toml B.toml --grid …``: the configs are one more axis of the grid
(``config``, each file's stem, first in member names, the table and ``summary.json``);
resumable; a config twice, two of one stem, a grid field one config does not read and a
folder of another config's runs refused in one line before anything trains."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pytest

from selfattn.cli.main import main
from selfattn.runs.sweep_grid import plan, shared_fields
from selfattn.runs.sweep_summary import mean_std
from selfattn.runs.table import TEST_FILE, read_run

from ..helpers_cli import one_line_error
from .test_sweep import JOBS, tiny_config

GRID = ["--grid", "train.lr=0.01", "--seeds", "0,1"]


def two_configs(folder: Path) -> tuple[Path, Path]:
    """``folder/tf.toml`` (a Transformer) and ``folder/rnn.toml`` (a bidirectional GRU):
    the same tiny data and training."""
    transformer = tiny_config(folder).rename(folder / "tf.toml")
    text = transformer.read_text(encoding="utf-8")
    rnn = folder / "rnn.toml"
    rnn.write_text(text.replace('"transformer"', '"bigru"').replace("num_heads = 2\n", ""))
    return transformer, rnn


def names(stem: str) -> list[str]:
    return [f"config={stem}_lr=0.01_seed={seed}" for seed in (0, 1)]


@pytest.fixture(scope="module")
def swept(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[str], Path, str]:
    """Two configs × a grid (of one value: each member a process, kept few) × two seeds,
    trained: (argv, sweep folder, stdout)."""
    folder = tmp_path_factory.mktemp("sweep-configs")
    out = folder / "out"
    argv = ["sweep", *map(str, two_configs(folder)), *GRID, "--jobs", JOBS, "-o", str(out)]
    stdout = io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(io.StringIO()):
        assert main(argv) == 0
    return argv, out, stdout.getvalue()


def test_every_config_combination_and_seed_is_a_run_keyed_by_the_configs_name(
    swept: tuple[list[str], Path, str],
) -> None:
    _, out, table = swept
    for stem, architecture in (("tf", "transformer"), ("rnn", "bigru")):
        for name in names(stem):
            record = read_run(out / name)
            assert record.problem is None and record.finished, name
            assert record.config["model.architecture"] == architecture
            assert record.config["train.lr"] == 0.01
            assert record.config["train.seed"] == int(name[-1])
    header, _, *rows = table.strip().splitlines()
    assert header.split()[:3] == ["config", "lr", "seeds"]
    assert [row.split()[:3] for row in rows] == [["tf", "0.01", "2/2"], ["rnn", "0.01", "2/2"]]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["grid"] == ["config", "train.lr"]
    assert set(summary["combinations"]) == {"tf-0.01", "rnn-0.01"}
    for stem in ("tf", "rnn"):
        tests = [json.loads((out / n / TEST_FILE).read_text())["accuracy"] for n in names(stem)]
        mean, std = mean_std(tests)
        assert std is not None
        assert summary["combinations"][f"{stem}-0.01"]["test_accuracy"] == {
            "mean": mean,
            "std": std,
        }
    record = json.loads((out / "sweep.json").read_text())
    assert set(record["configs"]) == {"tf", "rnn"}
    assert record["bases"]["rnn"]["model.architecture"] == "bigru"
    assert "train.lr" not in record["bases"]["tf"]
    assert summary["timing"]["runs_trained"] == 4
    assert (out / "sweep.png").stat().st_size > 0


def test_running_it_again_skips_every_finished_run(
    swept: tuple[list[str], Path, str], capsys: pytest.CaptureFixture[str]
) -> None:
    argv, out, table = swept
    before = {n: (out / n / "metrics.jsonl").read_text() for n in names("tf") + names("rnn")}
    assert main(argv) == 0
    captured = capsys.readouterr()
    assert captured.err.count(": skipped") == 4
    assert captured.out == table
    assert {n: (out / n / "metrics.jsonl").read_text() for n in before} == before


def test_a_folder_of_other_runs_of_one_of_the_configs_is_refused(
    swept: tuple[list[str], Path, str], capsys: pytest.CaptureFixture[str]
) -> None:
    argv, out, _ = swept
    error = one_line_error(capsys, [*argv, "--set", "data.batch_size=8"])
    assert f"{out} holds the runs of another config" in error
    assert "was started with tf's data.batch_size = 16, this sweep has 8" in error


def test_the_config_comes_first_and_the_first_configs_folder_is_the_default(
    tmp_path: Path,
) -> None:
    sweep = plan(two_configs(tmp_path), ["train.lr=0.01,0.1"], [0], [], None, 1)
    assert sweep.out == tmp_path / "run-sweep"  # tiny configs' run_dir is folder/run
    assert [m.name for m in sweep.members] == [
        "config=tf_lr=0.01_seed=0", "config=tf_lr=0.1_seed=0",
        "config=rnn_lr=0.01_seed=0", "config=rnn_lr=0.1_seed=0",
    ]  # fmt: skip
    assert sweep.members[2].values == {"config": "rnn", "train.lr": "0.01"}


@pytest.mark.parametrize(
    ("which", "grid", "expected"),
    [
        ("twice", [], "tf.toml: the config is given twice"),
        ("one stem", [], "two configs named tf (a sweep names each config's runs by"),
        ("missing", [], "error: cannot read config "),  # the file's own error, not a grid's
        ("both", ["--grid", "model.num_heads=2"], "(rnn, model.num_heads=2, seed 0): model."
         "num_heads = 2: architecture 'bigru' does not use it"),
        # a field of another architecture at its default: the loader drops it silently
        ("both", ["--grid", "model.num_heads=4"], "--grid model.num_heads: "),
    ],
)  # fmt: skip
def test_a_bad_list_of_configs_is_refused_before_any_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], which: str, grid: list[str], expected: str
) -> None:
    transformer, rnn = two_configs(tmp_path)
    (tmp_path / "other").mkdir()
    second = rnn
    if which == "twice":
        second = tmp_path / ".." / tmp_path.name / "tf.toml"  # another spelling, one file
    elif which == "one stem":
        second = rnn.rename(tmp_path / "other" / "tf.toml")
    elif which == "missing":
        second = tmp_path / "missing.toml"
    out = tmp_path / "out"
    error = one_line_error(capsys, ["sweep", str(transformer), str(second), *grid, "-o", str(out)])
    assert error.startswith("selfattn sweep: error: ")
    assert expected in error
    if grid == ["--grid", "model.num_heads=4"]:
        assert error.endswith(f"{rnn}: architecture 'bigru' does not read it (selfattn "
                              "config bigru lists the fields it reads)")  # fmt: skip
    assert not out.exists()


def test_a_one_config_sweep_record_is_still_read(tmp_path: Path) -> None:
    transformer, rnn = two_configs(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    base = shared_fields(plan(transformer, [], [0], [], out, 1).members[0].config, [])
    old = {"config": str(transformer), "base": base, "grid": {}, "seeds": [0], "sets": []}
    (out / "sweep.json").write_text(json.dumps(old))
    assert len(plan([transformer, rnn], ["train.lr=0.01"], [0], [], out, 1).members) == 2
    with pytest.raises(ValueError, match=r"was started with tf.s data\.batch_size = 16, this"):
        plan([transformer, rnn], [], [0], ["data.batch_size=8"], out, 1)
    with pytest.raises(ValueError, match=r"was started with data\.batch_size = 16, this sweep"):
        plan(transformer, [], [0], ["data.batch_size=8"], out, 1)
