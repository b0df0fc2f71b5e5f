"""The RNN encoder–decoder from the command line (``model.architecture = "rnn"``): train,
resume, eval with every decoding it has, predict, the attention figure, and the one-line
refusals, on a reversal task written as ``source<TAB>target`` lines."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from selfattn.cli.main import main
from selfattn.models.rnn_seq2seq import RNNSeq2Seq
from selfattn.tasks import Predictor, Seq2SeqTask

from ..helpers_cli import one_line_error, train_and_resume, write_config
from .test_cli_seq2seq import SYMBOLS, TRAIN, reversal_data  # the Transformer test's task


def _config(tmp_path: Path, run_dir: Path, *, epochs: int, extra: str = "") -> Path:
    """An LSTM encoder–decoder with additive attention on 300 reversal pairs; ``extra``:
    ``[seq2seq]`` lines."""
    model = {"architecture": "rnn", "rnn_cell": "lstm", "embed_dim": 24, "num_layers": 1}
    return write_config(
        tmp_path / "reverse_rnn.toml",
        run_dir=run_dir,
        data=reversal_data(tmp_path, 300, 30),
        model={**model, "ffn_dim": 32, "dropout": 0.0, "score": "additive"},
        seq2seq=extra,
        train={**TRAIN, "epochs": epochs},
    )


@pytest.mark.slow
def test_train_resume_eval_predict_attention(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_dir = tmp_path / "run"
    config = _config(tmp_path, run_dir, epochs=2)
    train_and_resume(config, run_dir, first=2, last=3)
    capsys.readouterr()

    decodings = set()
    for flags in (["--greedy"], ["--beam", "3"], ["--sample", "--temperature", "0.5"]):
        assert main(["eval", str(run_dir), *flags]) == 0
        metrics = json.loads(capsys.readouterr().out)
        assert {"bleu", "chrf", "exact_match"} <= set(metrics) and metrics["count"] == 30
        decodings.add(metrics["decoding"])
    assert decodings == {"greedy", "beam", "sample"}
    error = one_line_error(capsys, ["eval", str(run_dir), "--nat"])
    assert "left to right" in error

    assert main(["predict", str(run_dir), "a b c", "--beam", "2"]) == 0
    output = capsys.readouterr().out.strip()
    assert output and all(word in SYMBOLS for word in output.split())
    predictor = Predictor(run_dir)
    assert isinstance(predictor.model, RNNSeq2Seq) and predictor.model.cell == "lstm"
    example = predictor.example("a b c")
    assert predictor.predict(example, method="beam", beam_size=2) == output

    # The match weights: one map (one "layer" of one head), output tokens × source tokens.
    image = tmp_path / "cross.png"
    assert main(["attention", str(run_dir), "a b c", "-o", str(image)]) == 0
    assert image.stat().st_size > 0 and "cross-attention" in capsys.readouterr().out
    assert isinstance(predictor.task, Seq2SeqTask)
    figures = predictor.task.attention(predictor.model, example)
    assert [figure.title for figure in figures] == ["cross-attention"]
    maps, source, produced = predictor.task.cross_attention_maps(predictor.model, example)
    assert source == ["a", "b", "c"] and produced[-1] == "<eos>"
    assert len(maps) == 1 and maps[0].shape == (1, len(produced), 3)
    torch.testing.assert_close(maps[0].sum(-1), torch.ones(1, len(produced)))


@pytest.mark.parametrize(
    ("extra", "words"),
    [('output = "copy"', "pointer and copy"), ("nat = true", "non-autoregressive")],
)
def test_what_the_rnn_has_not_is_one_line_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: str, words: str
) -> None:
    config = _config(tmp_path, tmp_path / "run", epochs=1, extra=extra)
    error = one_line_error(capsys, ["train", str(config), "--no-progress"])
    assert words in error and "rnn" in error
