"""``model.pretrained`` on the task road: a BERT checkpoint's weights and tokenizer under
the lecture's heads, word labels on first subwords, layer-wise learning-rate decay, the
linear probe, and one-line refusals of what contradicts the checkpoint.

Most tests use a small random BERT folder with a WordPiece vocabulary that splits some
words of the data into several pieces; the real MiniLM is checked where it matters.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from selfattn.cli.main import main
from selfattn.config import Config, DataConfig, ModelConfig, TrainConfig, load_config
from selfattn.data import Example
from selfattn.models.pretrained import PretrainedTaskModel
from selfattn.pretrained.bert import BertEncoder, load_bert
from selfattn.pretrained.tokenizer import WordPieceTokenizer
from selfattn.tasks import Predictor, prepare
from selfattn.tasks.labelling import SequenceTask, TokenTask
from selfattn.train.optim import build_optimizer

pytestmark = pytest.mark.usefixtures("one_thread")


def config(
    dataset: Path,
    bert: Path | str,
    run_dir: Path,
    *,
    model: dict[str, object] | None = None,
    train: dict[str, object] | None = None,
    data: dict[str, object] | None = None,
) -> Config:
    return Config(
        data=DataConfig(dataset=str(dataset), batch_size=4, max_len=16, **(data or {})),
        model=ModelConfig(pretrained=str(bert), **(model or {})),  # type: ignore[arg-type]
        train=TrainConfig(epochs=1, lr=1e-3, warmup_steps=0, threads=1, **(train or {})),  # type: ignore[arg-type]
        run_dir=run_dir,
    )


def one_line_error(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "Traceback" not in err
    return err


# ---------------------------------------------------------------- weights and labels


def test_a_prepared_task_starts_from_the_checkpoint(
    bert_folder: Path, data: Path, tmp_path: Path
) -> None:
    prepared = prepare(config(data / "reviews.csv", bert_folder, tmp_path / "run"))
    model = prepared.task.build()
    assert isinstance(model, PretrainedTaskModel)
    reference = BertEncoder.from_folder(bert_folder)
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


def test_a_word_is_read_at_its_first_wordpiece(
    bert_folder: Path, data: Path, tmp_path: Path
) -> None:
    prepared = prepare(config(data / "tagged.txt", bert_folder, tmp_path / "run"))
    example = next(e for e in prepared.splits.train if "sitting" in (e.tokens or ()))
    batch = prepared.task.collate([example])
    assert batch.subwords is not None
    tokenizer = WordPieceTokenizer.from_pretrained(bert_folder)
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
    write_toml: Callable[..., Path],
    bert_folder: Path,
    data: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    folder = tmp_path / "bert"
    shutil.copytree(bert_folder, folder)
    run_dir = tmp_path / "run"
    toml = write_toml(tmp_path / "c.toml", data / "tagged.txt", folder)
    assert main(["train", str(toml), "--set", f"run_dir={run_dir}", "--no-progress"]) == 0
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
    write_toml: Callable[..., Path],
    bert_folder: Path,
    data: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    run_dir = tmp_path / "run"
    toml = write_toml(tmp_path / "c.toml", data / "reviews.csv", bert_folder, 'pooling = "cls"')
    assert main(["train", str(toml), "--set", f"run_dir={run_dir}", "--no-progress"]) == 0
    capsys.readouterr()
    assert main(["predict", str(run_dir), "a very good film"]) == 0
    assert capsys.readouterr().out.split("\t")[0] in ("good", "bad")
    predictor = Predictor(run_dir)
    assert predictor.task.score(predictor.model, "dev")["count"] > 0


# ---------------------------------------------------------------- learning rates


def test_layer_wise_decay_gives_each_depth_its_rate(
    bert_folder: Path, data: Path, tmp_path: Path
) -> None:
    prepared = prepare(
        config(data / "reviews.csv", bert_folder, tmp_path / "r", train={"layer_lr_decay": 0.5})
    )
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
    from selfattn.models.task_model import build_model

    model = build_model(
        ModelConfig(num_layers=3),
        task="sequence",
        vocab_size=20,
        char_vocab_size=None,
        feature_dim=None,
        num_labels=2,
    )
    optimizer = build_optimizer(model, TrainConfig(lr=1.0, layer_lr_decay=0.1))
    rates = sorted({group["lr"] for group in optimizer.param_groups}, reverse=True)
    assert rates == pytest.approx([1.0, 0.1, 0.01, 0.001, 0.0001])
    bigru = build_model(
        ModelConfig(architecture="bigru", positional=None),
        task="sequence",
        vocab_size=20,
        char_vocab_size=None,
        feature_dim=None,
        num_labels=2,
    )
    with pytest.raises(ValueError, match="not a stack of attention blocks"):
        build_optimizer(bigru, TrainConfig(layer_lr_decay=0.9))


def test_a_linear_probe_trains_the_head_alone(
    bert_folder: Path, data: Path, tmp_path: Path
) -> None:
    from selfattn.tasks import run

    cfg = config(
        data / "reviews.csv", bert_folder, tmp_path / "run", train={"freeze_encoder": True}
    )
    run(cfg, progress=False)
    trained = Predictor(tmp_path / "run").model
    assert isinstance(trained, PretrainedTaskModel)
    start = BertEncoder.from_folder(bert_folder).state_dict()
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
    write_toml: Callable[..., Path],
    bert_folder: Path,
    data: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    extra: str,
    expected: str,
) -> None:
    toml = write_toml(tmp_path / "c.toml", data / "reviews.csv", bert_folder, extra)
    err = one_line_error(capsys, ["train", str(toml), "--set", f"run_dir={tmp_path / 'r'}"])
    assert expected in err


def test_fields_that_repeat_the_checkpoint_are_accepted(
    write_toml: Callable[..., Path], bert_folder: Path, data: Path, tmp_path: Path
) -> None:
    shape = ["embed_dim = 32", "num_heads = 4", "num_layers = 2", "ffn_dim = 64"]
    extra = "\n".join([*shape, 'positional = "learned"', "norm_first = false"])
    toml = write_toml(tmp_path / "c.toml", data / "reviews.csv", bert_folder, extra)
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
    write_toml: Callable[..., Path],
    bert_folder: Path,
    data: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    override: str,
    expected: str,
) -> None:
    toml = write_toml(tmp_path / "c.toml", data / "reviews.csv", bert_folder)
    err = one_line_error(
        capsys, ["train", str(toml), "--set", override, "--set", f"run_dir={tmp_path / 'r'}"]
    )
    assert expected in err


def test_a_probe_without_a_checkpoint_is_one_line(
    data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    toml = tmp_path / "c.toml"
    toml.write_text(f'[data]\ndataset = "{data / "reviews.csv"}"\n[train]\nfreeze_encoder = true\n')
    err = one_line_error(capsys, ["train", str(toml), "--set", f"run_dir={tmp_path / 'r'}"])
    assert "train.freeze_encoder = true needs model.pretrained" in err


def test_vector_data_is_refused(
    write_toml: Callable[..., Path],
    tmp_path: Path,
    bert_folder: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    import numpy as np

    features = np.random.default_rng(0).normal(size=(60, 3)).astype(np.float32)
    np.savez(
        tmp_path / "v.npz", features=features, lengths=np.full(12, 5), labels=np.arange(12) % 2
    )
    toml = write_toml(tmp_path / "c.toml", tmp_path / "v.npz", bert_folder)
    err = one_line_error(capsys, ["train", str(toml), "--set", f"run_dir={tmp_path / 'r'}"])
    assert "a BERT checkpoint reads text" in err


def test_a_folder_that_is_not_a_checkpoint(
    write_toml: Callable[..., Path], data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "empty").mkdir()
    toml = write_toml(tmp_path / "c.toml", data / "reviews.csv", tmp_path / "empty")
    err = one_line_error(capsys, ["train", str(toml), "--set", f"run_dir={tmp_path / 'r'}"])
    assert "config.json" in err and str(tmp_path / "empty") in err


def test_an_input_longer_than_the_checkpoints_positions(
    bert_folder: Path, data: Path, tmp_path: Path
) -> None:
    prepared = prepare(config(data / "reviews.csv", bert_folder, tmp_path / "r"))
    words = tuple(["films"] * 15)  # 30 wordpieces + [CLS] [SEP] > 24 positions
    example = Example(tokens=words, features=None, label="good", source="long.csv:1")
    with pytest.raises(
        ValueError,
        match=r"^long.csv:1: 15 words make more wordpieces than the checkpoint's 24 positions",
    ):
        prepared.task.collate([example])


def test_seq2seq_is_refused(tmp_path: Path) -> None:
    from selfattn.models.task_model import check_fields

    with pytest.raises(
        ValueError, match=r"model.pretrained = .*seq2seq model is trained from scratch"
    ):
        check_fields(ModelConfig(pretrained="minilm-l6"), task="seq2seq", text=True)


# ---------------------------------------------------------------- the real checkpoint


def test_minilm_fine_tune_starts_from_minilm(
    minilm_folder: Path, data: Path, tmp_path: Path
) -> None:
    prepared = prepare(config(data / "tagged.txt", "minilm-l6", tmp_path / "run"))
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
        config = json.loads((target / "config.json").read_text())
        (target / "config.json").write_text(json.dumps({**config, "intermediate_size": 48}))
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
    config = json.loads((target / "config.json").read_text())
    (target / "config.json").write_text(json.dumps({**config, "model_type": "gpt2"}))
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
    write_toml: Callable[..., Path],
    bert_folder: Path,
    data: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    problem: str,
    expected: str,
) -> None:
    named = _broken_copy(bert_folder, tmp_path / "bert", problem)
    toml = write_toml(tmp_path / "c.toml", data / "reviews.csv", tmp_path / "bert")
    err = one_line_error(capsys, ["train", str(toml), "--set", f"run_dir={tmp_path / 'r'}"])
    assert named in err and expected in err


def test_demo_lists_a_fine_tuned_tagger_beside_the_scratch_one(
    write_toml: Callable[..., Path],
    bert_folder: Path,
    data: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    tagged = data / "tagged.txt"
    scratch = tmp_path / "scratch.toml"
    scratch.write_text(
        f'[data]\ndataset = "{tagged}"\ntest = "{tagged}"\nbatch_size = 4\n'
        "[model]\nembed_dim = 16\nnum_heads = 2\nnum_layers = 1\nffn_dim = 16\n"
        "[train]\nepochs = 1\nthreads = 1\n"
    )
    fine_tune = write_toml(tmp_path / "ft.toml", tagged, bert_folder, "")
    text = fine_tune.read_text().replace("[data]\n", f'[data]\ntest = "{tagged}"\n')
    fine_tune.write_text(text)
    runs, image = tmp_path / "runs", tmp_path / "demo.png"
    argv = ["demo", "--config", str(scratch), "--runs", str(runs), "-o", str(image)]
    assert main([*argv, "--baselines", "--pretrained", str(fine_tune), "--no-progress"]) == 0
    table = capsys.readouterr().out.split("token accuracy:")[1]
    assert f"{bert_folder} fine-tuned" in table and "self-attention" in table
    assert (runs / "pretrained" / "best").is_dir()


def test_a_fine_tune_resumes_with_its_decayed_rates(
    write_toml: Callable[..., Path],
    bert_folder: Path,
    data: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    toml = write_toml(tmp_path / "c.toml", data / "reviews.csv", bert_folder)
    argv = ["train", str(toml), "--set", f"run_dir={tmp_path / 'r'}", "--no-progress"]
    decay = ["--set", "train.layer_lr_decay=0.5"]
    assert main([*argv, *decay]) == 0
    with pytest.warns(UserWarning, match="changed settings train.epochs"):
        assert main([*argv, *decay, "--resume", "--set", "train.epochs=2"]) == 0
    lines = (tmp_path / "r" / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(line)["epoch"] for line in lines] == [1, 2]
