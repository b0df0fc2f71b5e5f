"""Models fine-tuned from a BERT checkpoint, out: ONNX (checked under onnxruntime) and a
Hugging Face folder that ``transformers.BertModel`` loads with the same hidden states —
the round trip checkpoint → fine-tune in selfattn → export → transformers."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnxruntime
import pytest
import torch
import transformers

from selfattn.cli.main import main
from selfattn.models.pretrained import PretrainedTaskModel
from selfattn.tasks import Predictor

from .conftest import FineTuning

pytestmark = pytest.mark.usefixtures("one_thread")


def fine_tuned(fine_tuning: FineTuning, dataset: str, name: str) -> Path:
    """A run fine-tuned on ``dataset`` (a file of the data folder), in ``tmp/name``."""
    toml = fine_tuning.toml(dataset, name=f"{name}.toml")
    return fine_tuning.train(toml, fine_tuning.tmp / name)


def export(run_dir: Path, fmt: str, out: Path, capsys: pytest.CaptureFixture[str]) -> str:
    """``selfattn export`` of ``run_dir`` as ``fmt`` to ``out``; what it printed."""
    assert main(["export", str(run_dir), "--format", fmt, "-o", str(out)]) == 0
    return capsys.readouterr().out


def test_hf_round_trip_of_a_fine_tuned_encoder(
    fine_tuning: FineTuning, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_dir = fine_tuned(fine_tuning, "reviews.csv", "reviews")
    out = tmp_path / "hf"
    assert "wrote" in export(run_dir, "hf", out, capsys)
    ours = Predictor(run_dir).model
    assert isinstance(ours, PretrainedTaskModel)
    # Fine-tuning moved the weights: the export is not the starting checkpoint.
    start = transformers.BertModel.from_pretrained(fine_tuning.bert).embeddings.word_embeddings
    assert not torch.equal(start.weight, ours.bert.embeddings.word_embeddings.weight)
    theirs = transformers.BertModel.from_pretrained(out).eval()
    tokenizer = transformers.PreTrainedTokenizerFast(tokenizer_file=str(out / "tokenizer.json"))
    tokenizer.pad_token = "[PAD]"
    batch = tokenizer(["the films", "a very good film ."], padding=True, return_tensors="pt")
    with torch.no_grad():
        expected = theirs(**batch, output_hidden_states=True).hidden_states
        got = ours.bert(batch["input_ids"], batch["attention_mask"]).hidden_states
    real = batch["attention_mask"].bool()
    for layer, (a, b) in enumerate(zip(got, expected, strict=True)):
        assert (a - b)[real].abs().max() <= 1e-5, f"layer {layer}"
    # The exported tokenizer is the run's: [CLS] … [SEP], "films" → film ##s.
    assert tokenizer.convert_ids_to_tokens(batch["input_ids"][0]) == [
        "[CLS]", "the", "film", "##s", "[SEP]", "[PAD]", "[PAD]",
    ]  # fmt: skip


def test_onnx_of_a_fine_tuned_tagger_reads_words_at_first_wordpieces(
    fine_tuning: FineTuning, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_dir = fine_tuned(fine_tuning, "tagged.txt", "tags")
    path = tmp_path / "tagger.onnx"
    summary = export(run_dir, "onnx", path, capsys)
    assert "inputs input_ids (batch, length), attention_mask (batch, length), first" in summary
    sidecar = json.loads(Path(f"{path}.json").read_text())
    assert sidecar["labels"] and "wordpiece_tokenizer" in sidecar
    # A user's sentence, through the exported file alone, tags like the run does.
    predictor = Predictor(run_dir)
    example = predictor.example("the dog sitting on mats")
    batch = predictor.task.collate([example])
    assert batch.subwords is not None
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    feed = {
        "input_ids": batch.subwords.input_ids.numpy(),
        "attention_mask": batch.subwords.attention_mask.numpy(),
        "first": batch.subwords.first.numpy(),
    }
    logits = session.run(None, feed)[0]
    with torch.no_grad():
        expected = predictor.model(batch).numpy()
    assert np.abs(logits - expected).max() <= 1e-4
    tags = [sidecar["labels"][i] for i in logits[0].argmax(-1)]
    assert " ".join(f"{w}/{t}" for w, t in zip(example.tokens or (), tags, strict=True)) == (
        predictor.predict(example)
    )


def test_onnx_of_a_fine_tuned_classifier(
    fine_tuning: FineTuning, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_dir = fine_tuned(fine_tuning, "reviews.csv", "reviews")
    for fmt, name in (("onnx", "m.onnx"), ("torch-export", "m.pt2")):
        line = export(run_dir, fmt, tmp_path / name, capsys)
        assert "outputs logits (batch, 2)" in line and "over lengths 5, 17, 24" in line
