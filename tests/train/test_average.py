"""``selfattn average RUN --last K -o DIR``: the mean of the last K epoch checkpoints'
weights, an inference checkpoint that eval and predict load; its one-line refusals."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch

from selfattn.cli.main import main
from selfattn.config import Config, DataConfig
from selfattn.train.average import average_checkpoints
from selfattn.train.checkpoint import load_checkpoint, save_checkpoint

from ..tiny_runs import write_reviews, write_tiny_config


def write_config(
    folder: Path, *, epochs: int = 3, keep_epochs: int = 0, architecture: str = "transformer"
) -> Path:
    """A tiny review classifier's config (and its data) in ``folder``; run_dir folder/run."""
    data = write_reviews(folder / "train.csv")
    return write_tiny_config(
        folder, data, epochs=epochs, architecture=architecture, keep_epochs=keep_epochs
    )


def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    threads = torch.get_num_threads()
    try:
        code = main(list(argv))
    finally:
        torch.set_num_threads(threads)
    out, err = capsys.readouterr()
    return code, out, err.strip()


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 3-epoch run that kept the checkpoints of its last 2 epochs."""
    folder = tmp_path_factory.mktemp("average")
    config = write_config(folder, epochs=3, keep_epochs=2)
    threads = torch.get_num_threads()
    try:
        assert main(["train", str(config), "--no-progress"]) == 0
    finally:
        torch.set_num_threads(threads)
    return folder / "run"


# ------------------------------------------------------------------- the arithmetic


def _checkpoint(folder: Path, weights: dict[str, torch.Tensor], epoch: int) -> Path:
    config = Config(data=DataConfig("x"))
    return save_checkpoint(folder, weights, None, None, {"epoch": epoch}, config, {})


def test_the_mean_of_three_checkpoints_and_integer_buffers_from_the_newest(
    tmp_path: Path,
) -> None:
    folders = [
        _checkpoint(
            tmp_path / f"epoch-{k}",
            {
                "weight": torch.tensor([[1.0, 2.0], [3.0, 4.0]]) * k,
                "half": torch.tensor([k, -k], dtype=torch.float16),
                "steps": torch.tensor(10 * k),
                "seen": torch.tensor([k == 3, False]),
            },
            k,
        )
        for k in (1, 2, 3)
    ]
    mean = average_checkpoints(folders)
    assert torch.equal(mean["weight"], torch.tensor([[2.0, 4.0], [6.0, 8.0]]))
    assert mean["half"].dtype == torch.float16
    assert torch.equal(mean["half"], torch.tensor([2.0, -2.0], dtype=torch.float16))
    assert mean["steps"].dtype == torch.int64 and int(mean["steps"]) == 30
    assert mean["seen"].tolist() == [True, False]


def test_checkpoints_of_different_shapes_are_refused(tmp_path: Path) -> None:
    a = _checkpoint(tmp_path / "epoch-1", {"weight": torch.zeros(2, 3)}, 1)
    b = _checkpoint(tmp_path / "epoch-2", {"weight": torch.zeros(2, 4)}, 2)
    with pytest.raises(ValueError, match=r"weight: \(2, 3\).*\(2, 4\)"):
        average_checkpoints([a, b])


# ------------------------------------------------------------------- a real run


def test_a_run_keeps_its_last_epochs(run_dir: Path) -> None:
    kept = sorted(path.name for path in run_dir.glob("epoch-*"))
    assert kept == ["epoch-2", "epoch-3"]
    assert load_checkpoint(run_dir / "epoch-3").optimizer_state is None  # weights only


def test_average_then_eval_and_predict(
    run_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "averaged"
    code, stdout, err = _cli(capsys, "average", str(run_dir), "--last", "2", "-o", str(out))
    assert code == 0, err
    assert "epoch-2, epoch-3" in stdout
    averaged = load_checkpoint(out)
    two, three = (load_checkpoint(run_dir / f"epoch-{e}").model_state for e in (2, 3))
    assert averaged.model_state.keys() == three.keys()
    for key, value in averaged.model_state.items():
        torch.testing.assert_close(value, (two[key] + three[key]) / 2, msg=key)
    assert averaged.optimizer_state is None
    assert averaged.state["averaged_from"] == ["epoch-2", "epoch-3"]
    assert averaged.vocabs == load_checkpoint(run_dir / "epoch-3").vocabs

    code, stdout, err = _cli(capsys, "eval", str(out), "--split", "train")
    assert code == 0, err
    assert "accuracy" in stdout
    code, stdout, err = _cli(capsys, "predict", str(out), "a warm funny film")
    assert code == 0, err
    assert stdout.strip().split()[-1] in ("pos", "neg") or "pos" in stdout or "neg" in stdout


def test_an_averaged_checkpoint_is_not_resumed(
    run_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    new_run = tmp_path / "new_run"
    code, _, err = _cli(capsys, "average", str(run_dir), "--last", "2", "-o", str(new_run / "last"))
    assert code == 0, err
    shutil.copy(run_dir / "metrics.jsonl", new_run / "metrics.jsonl")
    config = run_dir.parent / "config.toml"
    code, _, err = _cli(
        capsys, "train", str(config), "--set", f"run_dir={new_run}", "--resume", "--no-progress"
    )
    assert code == 2 and len(err.splitlines()) == 1
    assert "cannot be resumed" in err


# ------------------------------------------------------------------- refusals


def test_too_few_epoch_checkpoints(run_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _cli(capsys, "average", str(run_dir), "--last", "3", "-o", "unused")
    assert code == 2 and len(err.splitlines()) == 1
    assert "2 epoch checkpoints" in err and "train.keep_epochs >= 3" in err
    assert not Path("unused").exists()


def test_an_existing_output_needs_overwrite(
    run_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    assert _cli(capsys, "average", str(run_dir), "--last", "1", "-o", str(out))[0] == 0
    code, _, err = _cli(capsys, "average", str(run_dir), "--last", "2", "-o", str(out))
    assert code == 2 and len(err.splitlines()) == 1 and "--overwrite" in err
    argv = ("average", str(run_dir), "--last", "2", "-o", str(out), "--overwrite")
    assert _cli(capsys, *argv)[0] == 0
    assert load_checkpoint(out).state["averaged_from"] == ["epoch-2", "epoch-3"]
    code, _, err = _cli(capsys, "average", str(run_dir), "--last", "2", "-o", str(run_dir))
    assert code == 2 and len(err.splitlines()) == 1


def test_checkpoints_of_different_models_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "run"
    _checkpoint(run / "epoch-1", {"weight": torch.zeros(2, 3)}, 1)
    _checkpoint(run / "epoch-2", {"weight": torch.zeros(3, 3)}, 2)
    code, _, err = _cli(capsys, "average", str(run), "--last", "2", "-o", str(tmp_path / "o"))
    assert code == 2 and len(err.splitlines()) == 1
    assert "different models" in err
