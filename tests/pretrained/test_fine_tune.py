"""``model.pretrained`` on the task road: a BERT checkpoint's weights and tokenizer under
the lecture's heads, word labels on first subwords, layer-wise learning-rate decay, the
linear probe, and one-line refusals of what contradicts the checkpoint.

Most tests use a small random BERT folder with a WordPiece vocabulary that splits some
words of the data into several pieces; the real MiniLM is checked where it matters.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch

from selfattn.cli.main import main
from selfattn.config import TrainConfig, load_config, model_options
from selfattn.data import Example
from selfattn.models.pretrained import PretrainedTaskModel
from selfattn.pretrained.bert import bert_from_folder, load_bert
from selfattn.pretrained.tokenizer import WordPieceTokenizer
from selfattn.tasks import Predictor, prepare
from selfattn.tasks.sequence import SequenceTask
from selfattn.tasks.token import TokenTask
from selfattn.train.optim import build_optimizer

from ..helpers_cli import epochs_logged, write_config
from ..helpers_data import edit_json
from ..helpers_models import build
from .conftest import FineTuning

pytestmark = pytest.mark.usefixtures("one_thread")


# ---------------------------------------------------------------- weights and labels


def test_a_prepared_task_starts_from_the_checkpoint(fine_tuning: FineTuning) -> None:
    prepared = prepare(fine_tuning.config("reviews.csv"))
    model = prepared.task.build()
    assert isinstance(model, PretrainedTaskModel)
    reference = bert_from_folder(fine_tuning.bert)
    for name, tensor in reference.state_dict().items():
        torch.testing.assert_close(model.bert.state_dict()[name], tensor, rtol=0, atol=0)
    # The model reads the checkpoint's own wordpieces: the encoder's states are the
    # checkpoint's on the same ids.
    batch = prepared.task.collate(prepared.splits.train[:3])
    assert batch.subwords is not None
    model.eval()
    ours = model.bert(batch.subwords.input_ids, batch.subwords.attention_mask).last_hidden_state
    theirs = reference(batch.subwords.input_ids, batch.subwords.attention_mask).last_hidden_state
    torch.testing.assert_close(ours, theirs)


def test_a_word_is_read_at_its_first_wordpiece(fine_tuning: FineTuning) -> None:
    prepared = prepare(fine_tuning.config("tagged.txt"))
    example = next(e for e in prepared.splits.train if "sitting" in (e.tokens or ()))
    batch = prepared.task.collate([example])
    assert batch.subwords is not None
    tokenizer = WordPieceTokenizer.from_pretrained(fine_tuning.bert)
    pieces = tokenizer.tokenizer.encode(list(example.tokens or ()), is_pretokenized=True).tokens
    assert "##ting" in pieces and "##s" in pieces  # words of several pieces
    firsts = [pieces[i] for i in batch.subwords.first[0].tolist()]
    # "the dog sitting on mats ." → each word at its first piece.
    assert firsts == ["the", "dog", "sit", "on", "mat", "."]
    model = prepared.task.build().eval()
    logits = model(batch)  # (1, words, C)
    every_piece = model.forward_subwords(batch.subwords.input_ids, batch.subwords.attention_mask)
    assert logits.shape[:2] == (1, len(example))
    torch.testing.assert_close(logits[0], every_piece[0, batch.subwords.first[0]])
    # Labels stay one per word.
    assert batch.labels.shape == (1, len(example))


def test_token_task_predicts_one_tag_per_word_without_the_folder(
    fine_tuning: FineTuning, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "bert"
    shutil.copytree(fine_tuning.bert, folder)
    run_dir = fine_tuning.train(fine_tuning.toml("tagged.txt", bert=folder), tmp_path / "run")
    shutil.rmtree(folder)  # the run keeps the tokenizer and the weights it needs
    capsys.readouterr()
    assert main(["predict", str(run_dir), "the dog sitting on mats"]) == 0
    line = capsys.readouterr().out.strip()
    words = [item.rsplit("/", 1)[0] for item in line.split()]
    assert words == ["the", "dog", "sitting", "on", "mats"]
    assert main(["attention", str(run_dir), "the mats", "-o", str(tmp_path / "a.png")]) == 0
    assert "2 layers × 4 heads" in capsys.readouterr().out
    predictor = Predictor(run_dir)
    figure = predictor.attention(predictor.example("the mats"))[0]
    assert figure.queries == ["[CLS]", "the", "mat", "##s", "[SEP]"]
    assert figure.maps[0].shape == (4, 5, 5)


def test_sequence_task_trains_and_scores(
    fine_tuning: FineTuning, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    toml = fine_tuning.toml("reviews.csv", 'pooling = "cls"')
    run_dir = fine_tuning.train(toml, tmp_path / "run")
    capsys.readouterr()
    assert main(["predict", str(run_dir), "a very good film"]) == 0
    assert capsys.readouterr().out.split("\t")[0] in ("good", "bad")
    predictor = Predictor(run_dir)
    assert predictor.task.score(predictor.model, "dev")["count"] > 0


# ---------------------------------------------------------------- learning rates


def test_layer_wise_decay_gives_each_depth_its_rate(fine_tuning: FineTuning) -> None:
    prepared = prepare(fine_tuning.config("reviews.csv", train={"layer_lr_decay": 0.5}))
    model = prepared.task.build()
    optimizer = build_optimizer(model, prepared.task.config.train)
    rate = {id(p): group["lr"] for group in optimizer.param_groups for p in group["params"]}
    lr = 1e-3
    assert rate[id(model.head.proj.weight)] == pytest.approx(lr)
    assert rate[id(model.bert.encoder.layers[1].self_attn.q_proj.weight)] == pytest.approx(lr / 2)
    assert rate[id(model.bert.encoder.layers[0].norm2.bias)] == pytest.approx(lr / 4)
    assert rate[id(model.bert.embeddings.word_embeddings.weight)] == pytest.approx(lr / 8)
    assert len(rate) == sum(1 for _ in model.parameters())  # every parameter, once


def test_layer_wise_decay_on_a_transformer_from_scratch() -> None:
    model = build(model_options(num_layers=3), "sequence", vocab_size=20)
    optimizer = build_optimizer(model, TrainConfig(lr=1.0, layer_lr_decay=0.1))
    rates = sorted({group["lr"] for group in optimizer.param_groups}, reverse=True)
    assert rates == pytest.approx([1.0, 0.1, 0.01, 0.001, 0.0001])
    bigru = build(model_options(architecture="bigru", positional=None), "sequence", vocab_size=20)
    with pytest.raises(ValueError, match="not a stack of attention blocks"):
        build_optimizer(bigru, TrainConfig(layer_lr_decay=0.9))


def test_a_linear_probe_trains_the_head_alone(fine_tuning: FineTuning) -> None:
    from selfattn.tasks import run

    cfg = fine_tuning.config("reviews.csv", train={"freeze_encoder": True})
    run(cfg, progress=False)
    trained = Predictor(cfg.run_dir).model
    assert isinstance(trained, PretrainedTaskModel)
    start = bert_from_folder(fine_tuning.bert).state_dict()
    for name, tensor in trained.bert.state_dict().items():
        torch.testing.assert_close(tensor, start[name], rtol=0, atol=0)
    fresh = prepare(cfg).task.build()
    assert not torch.equal(trained.head.proj.weight, fresh.head.proj.weight)


# ---------------------------------------------------------------- refusals


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        ("embed_dim = 64", "model.embed_dim = 64 conflicts with the checkpoint"),
        ("num_layers = 4", "model.num_layers = 4 conflicts with the checkpoint"),
        ('attention = "window"', 'model.attention = "window": the checkpoint'),
        ('positional = "rotary"', 'model.positional = "rotary": the checkpoint'),
        ("char_features = true", "model.char_features = true: "),
    ],
)
def test_a_field_that_contradicts_the_checkpoint_is_one_line(
    fine_tuning: FineTuning, extra: str, expected: str
) -> None:
    assert expected in fine_tuning.refusal(fine_tuning.toml("reviews.csv", extra))


def test_fields_that_repeat_the_checkpoint_are_accepted(
    fine_tuning: FineTuning, tmp_path: Path
) -> None:
    shape = ["embed_dim = 32", "num_heads = 4", "num_layers = 2", "ffn_dim = 64"]
    extra = "\n".join([*shape, 'positional = "learned"', "norm_first = false"])
    toml = fine_tuning.toml("reviews.csv", extra)
    prepared = prepare(load_config(toml, [f"run_dir={tmp_path / 'r'}"]))
    assert isinstance(prepared.task.build(), PretrainedTaskModel)


@pytest.mark.parametrize(
    ("override", "expected"),
    [
        ("data.lowercase=true", "data.lowercase = true: the checkpoint"),
        ("data.bpe_vocab_size=50", "data.bpe_vocab_size = 50: the checkpoint"),
        ("train.layer_lr_decay=0", "train.layer_lr_decay must be in (0, 1]"),
    ],
)
def test_settings_the_checkpoint_decides_are_one_line(
    fine_tuning: FineTuning, override: str, expected: str
) -> None:
    assert expected in fine_tuning.refusal(fine_tuning.toml("reviews.csv"), override)


def test_a_probe_without_a_checkpoint_is_one_line(
    fine_tuning: FineTuning, data: Path, tmp_path: Path
) -> None:
    toml = write_config(
        tmp_path / "c.toml", data={"dataset": data / "reviews.csv"}, train={"freeze_encoder": True}
    )
    err = fine_tuning.refusal(toml)
    assert "train.freeze_encoder = true needs model.pretrained" in err


def test_vector_data_is_refused(fine_tuning: FineTuning, tmp_path: Path) -> None:
    import numpy as np

    features = np.random.default_rng(0).normal(size=(60, 3)).astype(np.float32)
    np.savez(
        tmp_path / "v.npz", features=features, lengths=np.full(12, 5), labels=np.arange(12) % 2
    )
    err = fine_tuning.refusal(fine_tuning.toml(tmp_path / "v.npz"))
    assert "a BERT checkpoint reads text" in err


def test_a_folder_that_is_not_a_checkpoint(fine_tuning: FineTuning, tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    err = fine_tuning.refusal(fine_tuning.toml("reviews.csv", bert=tmp_path / "empty"))
    assert "config.json" in err and str(tmp_path / "empty") in err


def test_an_input_longer_than_the_checkpoints_positions(fine_tuning: FineTuning) -> None:
    prepared = prepare(fine_tuning.config("reviews.csv"))
    words = tuple(["films"] * 15)  # 30 wordpieces + [CLS] [SEP] > 24 positions
    example = Example(tokens=words, features=None, label="good", source="long.csv:1")
    with pytest.raises(
        ValueError,
        match=r"^long.csv:1: 15 words make more wordpieces than the checkpoint's 24 positions",
    ):
        prepared.task.collate([example])


def test_seq2seq_is_refused() -> None:
    from selfattn.models.task_model import check_fields

    with pytest.raises(
        ValueError, match=r"model.pretrained = .*seq2seq model is trained from scratch"
    ):
        check_fields(model_options(pretrained="minilm-l6"), task="seq2seq", text=True)


# ---------------------------------------------------------------- the real checkpoint


def test_minilm_fine_tune_starts_from_minilm(minilm_folder: Path, fine_tuning: FineTuning) -> None:
    prepared = prepare(fine_tuning.config("tagged.txt", bert="minilm-l6"))
    assert isinstance(prepared.task, TokenTask)
    model = prepared.task.build().eval()
    batch = prepared.task.collate(prepared.splits.train[:2])
    assert batch.subwords is not None
    ids, mask = batch.subwords.input_ids, batch.subwords.attention_mask
    ours = model.bert(ids, mask).last_hidden_state
    torch.testing.assert_close(ours, load_bert(minilm_folder)(ids, mask).last_hidden_state)
    assert model.bert.config.hidden_size == 384 and len(model.bert.encoder.layers) == 6
    spec = json.loads(json.dumps(prepared.spec.to_dict()))  # stored as JSON in checkpoints
    assert spec["pretrained"]["num_hidden_layers"] == 6
    assert not isinstance(prepared.task, SequenceTask)


def _broken_copy(source: Path, target: Path, problem: str) -> str:
    """A copy of ``source`` with one problem; returns the file the error must name."""
    shutil.copytree(source, target)
    if problem == "shapes":
        edit_json(target / "config.json", intermediate_size=48)
        return str(target / "model.safetensors")
    if problem == "truncated":
        weights = target / "model.safetensors"
        weights.write_bytes(weights.read_bytes()[:1000])
        return str(weights)
    if problem == "no-cls":
        tokenizer = json.loads((target / "tokenizer.json").read_text())
        del tokenizer["model"]["vocab"]["[CLS]"]
        (target / "tokenizer.json").write_text(json.dumps(tokenizer))
        return str(target / "tokenizer.json")
    assert problem == "not-bert"
    edit_json(target / "config.json", model_type="gpt2")
    return str(target / "config.json")


@pytest.mark.parametrize(
    ("problem", "expected"),
    [
        ("shapes", "has shape (64, 32) but"),
        ("truncated", "not a readable safetensors file"),
        ("no-cls", "no [CLS] token in the vocabulary"),
        ("not-bert", "is not a BERT-family encoder"),
    ],
)
def test_a_broken_checkpoint_is_one_line_naming_its_file(
    fine_tuning: FineTuning, tmp_path: Path, problem: str, expected: str
) -> None:
    named = _broken_copy(fine_tuning.bert, tmp_path / "bert", problem)
    err = fine_tuning.refusal(fine_tuning.toml("reviews.csv", bert=tmp_path / "bert"))
    assert named in err and expected in err


def test_demo_lists_a_fine_tuned_tagger_beside_the_scratch_one(
    fine_tuning: FineTuning, data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tagged = data / "tagged.txt"
    scratch = write_config(
        tmp_path / "scratch.toml",
        data={"dataset": tagged, "test": tagged, "batch_size": 4},
        model={"embed_dim": 16, "num_heads": 2, "num_layers": 1, "ffn_dim": 16},
        train={"epochs": 1, "threads": 1},
    )
    fine_tune = fine_tuning.toml("tagged.txt", name="ft.toml", data={"test": tagged})
    runs, image = tmp_path / "runs", tmp_path / "demo.png"
    argv = ["demo", "--config", str(scratch), "--runs", str(runs), "-o", str(image)]
    assert main([*argv, "--baselines", "--pretrained", str(fine_tune), "--no-progress"]) == 0
    table = capsys.readouterr().out.split("token accuracy:")[1]
    assert f"{fine_tuning.bert} fine-tuned" in table and "self-attention" in table
    assert (runs / "pretrained" / "best").is_dir()


def test_a_fine_tune_resumes_with_its_decayed_rates(
    fine_tuning: FineTuning, tmp_path: Path
) -> None:
    toml, run_dir = fine_tuning.toml("reviews.csv"), tmp_path / "r"
    decay = ["--set", "train.layer_lr_decay=0.5"]
    fine_tuning.train(toml, run_dir, *decay)
    with pytest.warns(UserWarning, match="changed settings train.epochs"):
        fine_tuning.train(toml, run_dir, *decay, "--resume", "--set", "train.epochs=2")
    assert epochs_logged(run_dir) == [1, 2]
