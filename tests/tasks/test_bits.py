"""The bits task: the copy recipes, their batches, typed inputs, and the neural Turing
machine and LSTM trained, scored, asked and resumed from the command line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from selfattn.cli.main import main
from selfattn.config import load_config
from selfattn.data import load_dataset
from selfattn.data.copy_task import copy_inputs
from selfattn.data.recipes.bits import TESTS
from selfattn.specials import IGNORE_INDEX
from selfattn.tasks import Predictor
from selfattn.tasks.bits import BitsTask

from ..tiny_runs import train_config

CONFIG = Path(__file__).parents[2] / "configs" / "copy_ntm.toml"


def test_the_copy_recipes_ask_for_longer_sequences_in_test() -> None:
    copy = load_dataset("copy")
    assert copy.task == "bits" and copy.input == "vectors"
    train_lengths = {int(e.features[:, 8].argmax()) for e in copy.train[:2000]}
    assert train_lengths == set(range(1, 11))
    test_lengths = sorted({int(e.features[:, 8].argmax()) for e in copy.test})
    assert test_lengths == [length for length, _ in TESTS["copy"]] == [10, 20, 30, 40, 50]
    example = copy.train[0]
    length = int(example.features[:, 8].argmax())
    # The bits due are the input's bits, in order, after the delimiter.
    due = [bits for bits in example.label if bits]
    assert len(due) == length and all(not bits for bits in example.label[: length + 1])
    for t, bits in enumerate(due):
        assert bits[:8] == "".join(str(int(b)) for b in example.features[t, :8])
        assert bits[8] == "0"  # copy has no end marker


def _task(dataset: str = "copy") -> BitsTask:
    config = load_config(CONFIG, [f'data.dataset="{dataset}"', "data.train_fraction=0.01"])
    task = BitsTask(config)
    task.prepare(task.load_splits())
    return task


def test_batches_mark_only_the_due_bits() -> None:
    task = _task()
    examples = task.load_splits().dev[:4]
    batch = task.collate(examples)
    for row, example in enumerate(examples):
        due = torch.tensor([bool(bits) for bits in example.label])
        assert torch.equal(batch.due[row, : len(example)], due)
        assert (batch.labels[row, len(example) :] == IGNORE_INDEX).all()  # padding
        assert bool(batch.key_padding_mask[row, len(example) :].all())
    assert int((batch.labels != IGNORE_INDEX).sum()) == 9 * int(batch.due.sum())


def test_typed_inputs_are_the_copy_tasks_layout() -> None:
    task = _task()
    example = task.example("10110010 01100001")
    expected = copy_inputs(torch.tensor([[[1.0, 0, 1, 1, 0, 0, 1, 0], [0, 1, 1, 0, 0, 0, 0, 1]]]))
    assert torch.equal(torch.from_numpy(example.features), expected.inputs[0])
    repeat = _task("repeat-copy")
    assert repeat.count_channel == 9
    assert len(repeat.example("1011001001100001"[:8] + " *3")) == 1 + 1 + 1 + 3 + 1
    for text, message in [
        ("1011001", "is not 8 bits"),
        ("1011001x", "is not 8 bits"),
        ("10110010 *2", "takes no repeat count"),
        ("", "empty input"),
    ]:
        with pytest.raises(ValueError, match=message) as error:
            task.example(text)
        assert "\n" not in str(error.value)
    with pytest.raises(ValueError, match="needs the count last"):
        repeat.example("10110010")


def _train(run_dir: Path, *settings: str, resume: bool = False) -> int:
    return train_config(
        CONFIG,
        run_dir,
        "data.train_fraction=0.02",
        "model.memory_size=32",
        *settings,
        resume=resume,
    )


@pytest.fixture(scope="module")
def ntm_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run_dir = tmp_path_factory.mktemp("copy") / "ntm"
    assert _train(run_dir, "train.epochs=2") == 0
    return run_dir


def test_eval_scores_every_test_length(ntm_run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    lines = [json.loads(line) for line in (ntm_run / "metrics.jsonl").read_text().splitlines()]
    assert all(line["dev_loss"] < 0.69 for line in lines)  # below a guess's log 2 = 0.693
    capsys.readouterr()
    assert main(["eval", str(ntm_run), "--threads", "1"]) == 0
    metrics = json.loads(capsys.readouterr().out)
    assert metrics["count"] == 500
    per_length = [metrics[f"bits_wrong_length_{length}"] for length in (10, 20, 30, 40, 50)]
    # Every group weighs the same (100 sequences): the overall mean is theirs.
    assert metrics["bits_wrong"] == pytest.approx(sum(per_length) / 5)
    assert per_length[0] < per_length[-1] <= 50 * 8


def test_predict_and_the_heads_attention(
    ntm_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    assert main(["predict", str(ntm_run), "10110010 01100001 11110000"]) == 0
    written = capsys.readouterr().out.split()
    assert len(written) == 3 and all(len(bits) == 8 and set(bits) <= {"0", "1"} for bits in written)

    image = tmp_path / "heads.png"
    assert main(["attention", str(ntm_run), "10110010 01100001", "-o", str(image)]) == 0
    out = capsys.readouterr().out
    assert "write head" in out and "read head" in out
    predictor = Predictor(ntm_run)
    example = predictor.example("10110010 01100001")
    for figure in predictor.attention(example):
        (weights,) = figure.maps
        assert weights.shape == (1, len(example), 32) and len(figure.keys) == 32
        torch.testing.assert_close(weights.sum(-1), torch.ones(1, len(example)))  # per step

    assert main(["predict", str(ntm_run), "1011"]) == 2
    assert "is not 8 bits" in capsys.readouterr().err


def test_the_lstm_baseline_has_no_attention_and_models_stay_in_their_task(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_dir = tmp_path / "lstm"
    assert (
        _train(
            run_dir,
            'model.architecture="lstm"',
            "model.memory_size=50",  # back at its default: the lstm does not read it
            "model.num_layers=1",
            "train.epochs=1",
        )
        == 0
    )
    capsys.readouterr()
    assert main(["attention", str(run_dir), "10110010", "-o", str(tmp_path / "x.png")]) == 2
    assert 'architecture "lstm" has no attention' in capsys.readouterr().err
    transformer = ('model.architecture="transformer"', "model.memory_size=50")
    assert _train(tmp_path / "t", *transformer) == 2
    assert '"ntm"' in capsys.readouterr().err
    sentiment = [
        "train",
        "configs/sentiment_rt.toml",
        "--set",
        'model.architecture="ntm"',
        "--set",
        f"run_dir={tmp_path / 's'}",
    ]
    assert main(sentiment) == 2  # its num_layers = 1 is a field ntm does not read
    assert "architecture 'ntm' does not use it" in capsys.readouterr().err
    # ntm reads neither num_layers nor dropout: set back to their defaults, they are unset.
    assert main([*sentiment, "--set", "model.num_layers=2", "--set", "model.dropout=0.1"]) == 2
    assert "is for the bits task" in capsys.readouterr().err


def test_a_resumed_run_ends_as_an_uninterrupted_one(tmp_path: Path) -> None:
    straight, resumed = tmp_path / "straight", tmp_path / "resumed"
    assert _train(straight, "train.epochs=2") == 0
    assert _train(resumed, "train.epochs=1") == 0
    with pytest.warns(UserWarning, match="resuming with changed settings train.epochs"):
        assert _train(resumed, "train.epochs=2", resume=True) == 0
    (a,) = (straight / "last").glob("model-*.safetensors")
    (b,) = (resumed / "last").glob("model-*.safetensors")
    first, second = load_file(a), load_file(b)
    for name in first:
        torch.testing.assert_close(first[name], second[name], rtol=0, atol=0, msg=name)
