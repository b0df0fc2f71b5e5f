"""Early exit, ``attention`` and ``explore`` on a fine-tuned DistilBERT (a tiny random
one, ``save_pretrained``): exit heads after every block trained jointly, the adaptive
stack equal to every block's classifier read at each example's exit, ``eval
--exit-sweep`` on the run, and the attention maps over its wordpieces."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from selfattn.cli.main import main
from selfattn.explore import read_payload
from selfattn.models.pretrained_exit import PretrainedExitModel
from selfattn.tasks import Predictor, prepare
from selfattn.tasks.early_exit import exit_sweep
from selfattn.train.checkpoint import load_checkpoint
from selfattn.train.run_dir import checkpoint_in

from .conftest import FineTuning

pytestmark = pytest.mark.usefixtures("one_thread")

EXITS = 'exit_heads = true\nexit_loss_weights = "linear"\n'


@pytest.fixture(scope="module")
def runs(
    distilbert_folder: Path, data: Path, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Path]:
    """A token run and a sequence run, each fine-tuned from the tiny DistilBERT with exits
    (trained once for the module)."""
    tmp = tmp_path_factory.mktemp("distilbert-exit")
    tuning = FineTuning(distilbert_folder, data, tmp, None)  # type: ignore[arg-type]
    return {
        name: tuning.train(
            tuning.toml(dataset, EXITS, bert=distilbert_folder, name=f"{name}.toml"),
            tmp / name,
        )
        for name, dataset in (("token", "tagged.txt"), ("sequence", "reviews.csv"))
    }


@pytest.mark.parametrize("task", ["token", "sequence"])
def test_the_adaptive_stack_answers_as_each_exit_does(task: str, runs: dict[str, Path]) -> None:
    """Rows that leave the batch (and the columns cut) change no answer: each example's
    logits are its exit block's classifier's on the whole batch, and the sweep's point at a
    threshold is what the adaptive stack gives there."""
    predictor = Predictor(runs[task])
    model = predictor.model
    assert isinstance(model, PretrainedExitModel) and model.num_layers == 3
    model.eval()
    examples = [predictor.task.fit(model, e) for e in predictor.task.split_examples("train")]
    [batch] = predictor.task.batches_of(examples[:6])
    every = model(batch, exits=True)
    assert isinstance(every, list) and len(every) == 3
    sure = [float(x) for x in torch.linspace(0.0, 1.0, 11)]
    for threshold in sure:
        result = model.early_exit(batch, threshold, "entropy")
        for row, layers in enumerate(result.layers.tolist()):
            expected = every[layers - 1][row]
            got = result.logits[row][: expected.shape[0]]
            if task == "token":  # padded words hold nothing; real ones must agree
                real = ~batch.key_padding_mask[row, : expected.shape[0]]
                expected, got = expected[real], got[real]
            assert torch.allclose(got, expected, atol=1e-5), (threshold, row, layers)
    assert model.early_exit(batch, 0.0).layers.eq(1).all()
    assert model.early_exit(batch, 1.5).layers.eq(3).all()
    full = model(batch)
    assert isinstance(full, torch.Tensor) and torch.allclose(full, every[-1], atol=1e-6)
    sweep = exit_sweep(model, [batch], sure, "entropy")
    for point, threshold in zip(sweep.points, sure, strict=True):
        assert point.mean_layers == pytest.approx(
            float(model.early_exit(batch, threshold, "entropy").layers.float().mean())
        )


def test_exits_train_with_their_blocks_learning_rates(fine_tuning: FineTuning) -> None:
    """Exit i's classifier sits in block i's layer-wise group; the head in the last."""
    config = fine_tuning.config(
        "reviews.csv", bert=fine_tuning.bert, model={"exit_heads": True, "pooling": "cls"}
    )
    model = prepare(config).task.build()
    assert isinstance(model, PretrainedExitModel)
    groups = [{id(p) for p in group} for group in model.layer_groups()]
    for index, exit_head in enumerate(model.exits):
        assert {id(p) for p in exit_head.parameters()} <= groups[1 + index]
    assert {id(p) for p in model.head.parameters()} == groups[-1]
    assert sum(len(g) for g in groups) == len(list(model.parameters()))


def test_eval_sweeps_the_runs_exits(
    runs: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    plot = tmp_path / "sweep.png"
    argv = ["eval", str(runs["sequence"]), "--split", "dev", "--exit-sweep", "-o", str(plot)]
    assert main([*argv, "--exit-criterion", "entropy"]) == 0
    out = capsys.readouterr().out
    assert "early exit on entropy" in out and "fixed depth: 1: " in out and plot.is_file()
    assert main(["eval", str(runs["token"]), "--split", "dev", "--exit-threshold", "2"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["mean_layers"] == report["num_layers"] == 3
    assert report["accuracy"] == report["full_depth_accuracy"]


def test_attention_and_explore_show_the_wordpieces(
    runs: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = str(runs["token"])
    assert main(["attention", run, "the mats", "-o", str(tmp_path / "a.png")]) == 0
    assert "3 layers × 4 heads" in capsys.readouterr().out
    page = tmp_path / "page.html"
    assert main(["explore", run, "the cat sitting", "-o", str(page), "--threads", "1"]) == 0
    [example] = read_payload(page.read_text(encoding="utf-8"))["examples"]
    [figure] = example["figures"]
    assert figure["queries"] == ["[CLS]", "the", "cat", "sit", "##ting", "[SEP]"]
    assert len(figure["maps"]) == 3


def test_exit_heads_on_regression_are_one_line(fine_tuning: FineTuning, tmp_path: Path) -> None:
    csv = tmp_path / "scores.csv"
    csv.write_text("".join(f"{i % 3}.5,a very good film .\n" for i in range(16)))
    err = fine_tuning.refusal(fine_tuning.toml(csv, EXITS), "data.task=regression")
    assert "model.exit_heads = true: early exit is for token and sequence tasks" in err


def test_exits_train_alone_on_a_fine_tuned_run(
    fine_tuning: FineTuning, distilbert_folder: Path, tmp_path: Path
) -> None:
    """DeeBERT's second stage: ``train.init_from`` a run fine-tuned without exits, with
    ``train.freeze_encoder``, trains the exits alone; the encoder and the last head stay
    the run's weights, so the full depth answers as the run does."""
    plain = fine_tuning.train(
        fine_tuning.toml("tagged.txt", bert=distilbert_folder, name="plain.toml"), tmp_path / "p"
    )
    toml = fine_tuning.toml("tagged.txt", EXITS, bert=distilbert_folder, name="exits.toml")
    staged = fine_tuning.train(
        toml,
        tmp_path / "s",
        "--set",
        f"train.init_from={plain}",
        "--set",
        "train.freeze_encoder=true",
    )
    before = load_checkpoint(checkpoint_in(plain)).model_state
    after = load_checkpoint(staged / "last")
    exits = {name for name in after.model_state if name.startswith("exits.")}
    assert exits and set(after.model_state) - exits == set(before)
    for name, tensor in before.items():
        assert torch.equal(after.model_state[name], tensor), name
    assert after.optimizer_state is not None  # Adam's moments: the exits' tensors alone
    moments = after.optimizer_state["state"]
    assert len(moments) == len(exits) and all(m["step"] > 0 for m in moments.values())


def test_frozen_exits_need_a_fine_tuned_run(fine_tuning: FineTuning) -> None:
    """Freezing a model with exits freezes its last head: without a run to take it from,
    one line."""
    toml = fine_tuning.toml("tagged.txt", EXITS)
    err = fine_tuning.refusal(toml, "train.freeze_encoder=true")
    assert "set train.init_from to a run fine-tuned without exits" in err
