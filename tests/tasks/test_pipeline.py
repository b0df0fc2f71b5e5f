"""The one task road: a registry of task types, one Predictor, a CLI without task-type
branches, and one-line refusals of what a task type cannot do."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import numpy as np
import pytest

from selfattn.cli import model_cmds
from selfattn.cli.main import main
from selfattn.config import Config, DataConfig
from selfattn.tasks import TASKS, Predictor, Task, register_task, task_named

from ..helpers_cli import one_line_error

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "checkpoints_v1"

pytestmark = pytest.mark.usefixtures("one_thread")


def test_every_task_type_is_registered() -> None:
    assert set(TASKS) == {
        "token",
        "sequence",
        "regression",
        "multilabel",
        "seq2seq",
        "bits",
        "whisper",
    }
    for name, cls in TASKS.items():
        assert cls.name == name and issubclass(cls, Task)


def test_an_unknown_task_type_and_a_second_registration_are_refused() -> None:
    with pytest.raises(ValueError, match="unknown task type 'ranking'; choose one of") as info:
        task_named("ranking", Config(DataConfig("pos-wsj")))
    assert "\n" not in str(info.value)

    class Impostor(TASKS["token"]):  # type: ignore[misc, valid-type]
        name = "token"

    with pytest.raises(ValueError, match="already registered"):
        register_task(Impostor)


def test_the_cli_does_not_branch_on_the_task_type() -> None:
    """predict / eval / attention ask the task; no isinstance or task-name test."""
    tree = ast.parse(inspect.getsource(model_cmds))
    calls = [
        node.func.id
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
    ]
    assert "isinstance" not in calls
    strings = {node.value for node in ast.walk(tree) if isinstance(node, ast.Constant)}
    assert not strings & set(TASKS)


@pytest.mark.parametrize("task", ["token", "sequence", "seq2seq"])
def test_state_round_trips_through_restore(task: str) -> None:
    """A task restored from its own state predicts what the checkpoint's task predicts."""
    predictor = Predictor(FIXTURES / task)
    again = task_named(task, predictor.config, predictor.spec)
    again.restore(predictor.task.state())
    example = predictor.example("a b c")
    assert again.predict(predictor.model, example) == predictor.predict(example)


@pytest.mark.parametrize("task", ["token", "sequence"])
@pytest.mark.parametrize("flag", [["--beam", "2"], ["--sample"], ["--nat"], ["--top-k", "3"]])
def test_decoding_options_are_refused_by_models_that_do_not_decode(
    task: str, flag: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    err = one_line_error(capsys, ["predict", str(FIXTURES / task), "a b", *flag])
    assert f"a {task} model" in err and err.count(flag[0]) == 1
    # --greedy is what such a model does anyway: its likeliest output.
    assert main(["predict", str(FIXTURES / task), "a b", "--greedy"]) == 0


@pytest.mark.parametrize("task", ["token", "sequence"])
def test_a_decoding_batch_size_is_refused_by_models_that_do_not_decode(
    task: str, capsys: pytest.CaptureFixture[str]
) -> None:
    err = one_line_error(capsys, ["eval", str(FIXTURES / task), "--batch-size", "8"])
    assert f"a {task} model" in err and "--batch-size" in err


def test_a_text_model_given_a_file_of_another_kind_says_what_it_reads(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    vectors = tmp_path / "set.npz"
    np.savez(vectors, features=np.zeros((3, 4), dtype=np.float32))
    err = one_line_error(capsys, ["predict", str(FIXTURES / "token"), str(vectors)])
    assert "set.npz: this model reads text" in err


def test_seq2seq_attention_writes_cross_encoder_and_decoder_maps(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    image = tmp_path / "map.png"
    assert main(["attention", str(FIXTURES / "seq2seq"), "a b c", "-o", str(image)]) == 0
    lines = capsys.readouterr().out.splitlines()
    written = [Path(line.split()[1].rstrip(":")) for line in lines]
    assert written == [
        image,
        tmp_path / "map.encoder-self-attention.png",
        tmp_path / "map.decoder-self-attention.png",
    ]
    assert all(path.stat().st_size > 0 for path in written)
    assert [line.split(": ")[1].split(" (")[0] for line in lines] == [
        "cross-attention",
        "encoder self-attention",
        "decoder self-attention",
    ]


def test_seq2seq_settings_on_a_task_that_decodes_nothing_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`[seq2seq]` beam_size on a tagger would be silently ignored: one line instead."""
    config = Path(__file__).resolve().parents[2] / "configs" / "pos_wsj.toml"
    flags = ["--set", f"data.dataset={FIXTURES / 'tags.txt'}", "--set", "seq2seq.beam_size=8"]
    flags += ["--set", f"run_dir={tmp_path / 'run'}", "--set", "train.epochs=1"]
    err = one_line_error(capsys, ["train", str(config), *flags, "--no-progress"])
    assert "seq2seq.beam_size" in err and "a token task" in err
