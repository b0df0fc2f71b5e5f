"""``--threads N`` on every command that computes, and the default thread policy."""

from __future__ import annotations

import argparse
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from selfattn import runtime
from selfattn.cli import bench_cmd, demo, explore_cmd, export_cmd, main, model_cmds, toy
from selfattn.config import load_config

from ..helpers_cli import TINY_MODEL, write_config

# command line (without --threads) → (module, name of the function it runs)
COMMANDS = {
    "toy": (["toy"], toy, "run"),
    "demo": (["demo"], demo, "run_demo"),
    "train": (["train", "tiny.toml"], model_cmds, "run_train"),
    "eval": (["eval", "runs/x"], model_cmds, "run_eval"),
    "predict": (["predict", "runs/x", "I saw a saw"], model_cmds, "run_predict"),
    "attention": (["attention", "runs/x", "I saw a saw"], model_cmds, "run_attention"),
    "bench": (["bench", "attention"], bench_cmd, "run"),
    "export": (["export", "runs/x", "--format", "onnx", "-o", "m.onnx"], export_cmd, "run"),
    "explore": (["explore", "runs/x", "I saw a saw"], explore_cmd, "run"),
}
# sweep's runs are processes of one thread each (--jobs says how many), and it scores
# their test splits on one thread: it takes no --threads.
NOT_COMPUTING = {"config", "data", "average", "runs", "sweep"}


@pytest.fixture
def seen(monkeypatch: pytest.MonkeyPatch) -> dict[str, argparse.Namespace | int]:
    """Every command's run function replaced by one that records its args and threads."""
    record: dict[str, argparse.Namespace | int] = {}

    def fake_run(args: argparse.Namespace) -> int:
        record["args"] = args
        record["threads"] = torch.get_num_threads()
        return 0

    for _, module, name in COMMANDS.values():
        monkeypatch.setattr(module, name, fake_run)
    return record


@pytest.fixture
def load(monkeypatch: pytest.MonkeyPatch) -> None:
    """A machine with 3 cores, none busy: the default is 3 threads (not torch's 2 here)."""
    monkeypatch.setattr(runtime, "available_cores", lambda: 3)
    monkeypatch.setattr(runtime, "busy_cores", lambda seconds=0.1: 0.0)


def test_every_computing_command_is_listed_here() -> None:
    parser = main.build_parser()
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    assert set(commands.choices) == set(COMMANDS) | NOT_COMPUTING


@pytest.mark.parametrize("command", sorted(COMMANDS))
@pytest.mark.parametrize("threads", [1, 3])
def test_threads_option_sets_torch_threads_for_the_run(
    command: str, threads: int, seen: dict[str, object]
) -> None:
    argv, _, _ = COMMANDS[command]
    assert main.main([*argv, "--threads", str(threads)]) == 0
    assert seen["threads"] == threads


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_without_threads_the_default_policy_applies(
    command: str, seen: dict[str, object], load: None
) -> None:
    torch.set_num_threads(1)
    argv, _, _ = COMMANDS[command]
    assert main.main(argv) == 0
    assert seen["threads"] == 3


@pytest.mark.parametrize("command", ["toy", "train", "bench"])
@pytest.mark.parametrize("threads", ["0", "-2"])
def test_threads_below_one_is_a_one_line_error(
    command: str, threads: str, seen: dict[str, object], capsys: pytest.CaptureFixture[str]
) -> None:
    argv, _, _ = COMMANDS[command]
    assert main.main([*argv, "--threads", threads]) == 2
    err = capsys.readouterr().err
    assert err.strip().splitlines() == [
        f"selfattn {command}: error: --threads must be >= 1, got {threads}"
    ]
    assert "args" not in seen


def test_data_command_takes_no_threads(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main.main(["data", "list", "--threads", "1"])
    assert exit_info.value.code == 2


def test_train_threads_overrides_the_config(
    tmp_path: Path, seen: dict[str, argparse.Namespace]
) -> None:
    config = _tiny_config(tmp_path, threads=1)
    assert main.main(["train", str(config), "--set", "train.epochs=1", "--threads", "3"]) == 0
    args = seen["args"]
    assert load_config(args.config, args.overrides).train.threads == 3
    assert load_config(args.config, args.overrides).train.epochs == 1


def test_train_without_threads_keeps_the_config(
    tmp_path: Path, seen: dict[str, argparse.Namespace]
) -> None:
    config = _tiny_config(tmp_path, threads=1)
    assert main.main(["train", str(config)]) == 0
    args = seen["args"]
    assert load_config(args.config, args.overrides).train.threads == 1


def test_toy_runs_with_the_threads_it_is_given(capsys: pytest.CaptureFixture[str]) -> None:
    torch.set_num_threads(2)
    assert main.main(["toy", "--steps", "2", "--no-progress", "--threads", "1"]) == 0
    assert torch.get_num_threads() == 1
    assert "self-attention" in capsys.readouterr().out


def test_a_real_training_uses_the_configs_threads(tmp_path: Path, load: None) -> None:
    """The command's default (3 here) comes first; the loop then applies train.threads."""
    config = _tiny_config(tmp_path, threads=1)
    assert main.main(["train", str(config), "--no-progress"]) == 0
    assert torch.get_num_threads() == 1


@pytest.mark.parametrize(
    ("busy", "cores", "expected"),
    [
        (0.0, 2, 2),  # idle: every core
        (0.3, 2, 2),  # a little background work: still every core
        (0.7, 2, 1),  # another process holds most of a core
        (1.0, 2, 1),
        (2.0, 2, 1),  # fully busy: never fewer than one
        (5.0, 2, 1),
        (3.4, 16, 13),
        (0.0, 1, 1),
        (float("nan"), 4, 4),  # no load reading (not Linux): every core
    ],
)
def test_default_threads_under_load(busy: float, cores: int, expected: int) -> None:
    assert runtime.default_threads(busy=busy, cores=cores) == expected


def test_default_threads_reads_the_load(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runtime, "available_cores", lambda: 4)
    monkeypatch.setattr(runtime, "busy_cores", lambda seconds=0.1: 2.2)
    assert runtime.default_threads() == 2
    assert runtime.configure_threads(None) == 2
    assert torch.get_num_threads() == 2


def test_configure_threads_refuses_zero() -> None:
    with pytest.raises(ValueError, match="threads must be >= 1, got 0"):
        runtime.configure_threads(0)


def test_busy_cores_and_available_cores_are_core_counts() -> None:
    busy = runtime.busy_cores(0.05)
    assert math.isnan(busy) or 0.0 <= busy <= (os.cpu_count() or 1)  # NaN off Linux
    assert 1 <= runtime.available_cores() <= (os.cpu_count() or 1)


def test_prepare_environment_sets_only_what_is_unset(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(sys.modules, "torch")  # as before `import torch`
    environ: dict[str, str] = {}
    assert runtime.prepare_environment(environ)
    assert environ == runtime.OPENMP_ENVIRONMENT
    for name in runtime.SPIN_VARIABLES:
        mine = {name: "passive" if name == "OMP_WAIT_POLICY" else "20000"}
        assert not runtime.prepare_environment(mine)
        assert mine == {name: mine[name]}


def test_prepare_environment_is_too_late_once_torch_is_loaded() -> None:
    environ: dict[str, str] = {}
    assert not runtime.prepare_environment(environ)
    assert environ == {}


@pytest.mark.parametrize(
    ("environ", "expected"),
    [({}, "1000"), ({"GOMP_SPINCOUNT": "7"}, "7"), ({"OMP_WAIT_POLICY": "active"}, "None")],
)
def test_import_selfattn_sets_the_spin_count_before_torch_loads(
    environ: dict[str, str], expected: str
) -> None:
    """In a fresh process, as the ``selfattn`` command starts: the variable is in place
    when libgomp reads it (at ``import torch``, which ``import selfattn`` does after)."""
    env = {k: v for k, v in os.environ.items() if k not in runtime.SPIN_VARIABLES}
    code = "import os, selfattn; print(os.environ.get('GOMP_SPINCOUNT'))"
    out = subprocess.run(
        [sys.executable, "-c", code], env={**env, **environ}, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == expected


def _tiny_config(tmp_path: Path, *, threads: int) -> Path:
    lines = ["I/PRP saw/VBD a/DT saw/NN", "it/PRP bit/VBD the/DT dog/NN"] * 8
    data = tmp_path / "tagged.txt"
    data.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return write_config(
        tmp_path / "tiny.toml",
        run_dir=tmp_path / "run",
        data={"dataset": data, "dev": data, "batch_size": 8},
        model={"architecture": "transformer", **TINY_MODEL, "dropout": None},
        train={"epochs": 1, "device": "cpu", "threads": threads},
    )
