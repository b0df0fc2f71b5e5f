"""``selfattn export``: ONNX (checked with onnxruntime) and ``torch.export`` files that
compute what the PyTorch model does, their JSON sidecar, and one-line refusals of what
cannot be exported."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import onnxruntime
import pytest
import torch

from selfattn.cli.main import main
from selfattn.export import TOLERANCE, refusal, wrap
from selfattn.models.registry import model_options
from selfattn.tasks import Predictor

from ..helpers_cli import one_line_error
from ..helpers_models import build
from .conftest import FIXTURES, RunMaker

pytestmark = pytest.mark.usefixtures("one_thread")

SUMMARY = re.compile(
    r"^wrote (?P<path>\S+) \((?P<kind>[^)]*)\): inputs (?P<inputs>.*); outputs (?P<output>.*); "
    r"max \|(?:onnxruntime|torch\.export) − torch\| = (?P<diff>\S+) over lengths [\d, ]+$"
)


def export(run: Path, fmt: str, out: Path, capsys: pytest.CaptureFixture[str]) -> re.Match[str]:
    capsys.readouterr()  # a fixture's training output
    assert main(["export", str(run), "--format", fmt, "-o", str(out)]) == 0
    line = capsys.readouterr().out.strip()
    match = SUMMARY.match(line)
    assert match, line
    assert float(match["diff"]) <= TOLERANCE
    return match


def refused(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    capsys.readouterr()
    err = one_line_error(capsys, ["export", *argv])
    assert err.startswith("selfattn export: error: "), err
    return err


def onnx_parity(run: Path, onnx_path: Path, lengths: list[int]) -> None:
    """onnxruntime equals the PyTorch model on padded batches of 1 and 3 (token outputs: at
    real positions)."""
    predictor = Predictor(run)
    chars = getattr(predictor.task, "chars", None)
    exportable = wrap(predictor.model.eval(), word_length=chars.max_word_len if chars else 16)
    session = onnxruntime.InferenceSession(str(onnx_path), providers=["CPUExecutionProvider"])
    names = [spec.name for spec in exportable.inputs]
    assert [i.name for i in session.get_inputs()] == names
    generator = torch.Generator().manual_seed(5)
    for length in lengths:
        for batch_size in (1, 3):
            inputs = exportable.example_inputs(batch_size, length, generator=generator)
            with torch.no_grad():
                expected = exportable.module(*inputs).numpy()
            feed = {name: value.numpy() for name, value in zip(names, inputs, strict=True)}
            got = session.run(None, feed)[0]
            assert got.shape == expected.shape
            if expected.ndim == 3:  # token logits: real positions only
                real = ~inputs[names.index("padding_mask")].numpy()
                got, expected = got[real], expected[real]
            np.testing.assert_allclose(got, expected, rtol=0, atol=TOLERANCE)


def test_text_token_model_to_onnx(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Relative positions and character features: three inputs."""
    out = tmp_path / "tagger.onnx"
    match = export(FIXTURES / "token", "onnx", out, capsys)
    assert match["kind"].startswith("onnx, opset ")
    assert match["inputs"] == (
        "token_ids (batch, length), char_ids (batch, length, 16), padding_mask (batch, length)"
    )
    assert match["output"] == "logits (batch, length, 4)"
    onnx_parity(FIXTURES / "token", out, [1, 6, 30])
    sidecar = json.loads((tmp_path / "tagger.onnx.json").read_text(encoding="utf-8"))
    predictor = Predictor(FIXTURES / "token")
    assert sidecar["labels"] == predictor.task.labels.labels
    token_to_id = sidecar["vocab"]["token_to_id"]
    assert token_to_id["<pad>"] == 0 and token_to_id["<unk>"] == 1
    assert all(predictor.task.vocab.token_id(t) == i for t, i in token_to_id.items())
    assert [i["name"] for i in sidecar["inputs"]] == ["token_ids", "char_ids", "padding_mask"]
    assert sidecar["output"]["shape"] == ["batch", "length", 4]


def test_text_sequence_model_to_onnx(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "reviews.onnx"
    match = export(FIXTURES / "sequence", "onnx", out, capsys)
    assert match["output"].startswith("logits (batch, ")
    onnx_parity(FIXTURES / "sequence", out, [2, 9, 33])


def test_vector_model_with_learned_positions_to_onnx(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], trained: RunMaker
) -> None:
    """Learned positions: the length's range ends at the table's last row."""
    run = trained("vectors", "model.positional=learned")
    out = tmp_path / "sets.onnx"
    match = export(run, "onnx", out, capsys)
    assert match["inputs"] == "features (batch, length, 3), padding_mask (batch, length)"
    sidecar = json.loads((tmp_path / "sets.onnx.json").read_text(encoding="utf-8"))
    assert sidecar["length"] == {"min": 1, "max": 48}
    assert sidecar["labels"] == Predictor(run).task.labels.labels and "vocab" not in sidecar
    onnx_parity(run, out, [1, 7, 48])


def test_torch_export_round_trip(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "tagger.pt2"
    match = export(FIXTURES / "token", "torch-export", out, capsys)
    assert match["kind"] == "torch-export"
    program = torch.export.load(out).module()
    exportable = wrap(Predictor(FIXTURES / "token").model.eval())
    inputs = exportable.example_inputs(3, 11, generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        torch.testing.assert_close(
            program(*inputs), exportable.module(*inputs), atol=TOLERANCE, rtol=0
        )
    assert json.loads((tmp_path / "tagger.pt2.json").read_text())["format"] == "torch-export"


@pytest.mark.parametrize("kernel", ["linear", "performer", "linformer"])
def test_other_kernels_that_trace_export(
    kernel: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], trained: RunMaker
) -> None:
    run = trained("reviews", f"model.attention={kernel}")
    export(run, "torch-export", tmp_path / "model.pt2", capsys)


@pytest.mark.parametrize("kernel", ["window", "lsh", "nystrom"])
def test_kernels_whose_shape_follows_the_length_are_refused(
    kernel: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], trained: RunMaker
) -> None:
    size = ["model.attention_size=2"] if kernel == "window" else []
    run = trained("reviews", f"model.attention={kernel}", *size)
    err = refused([str(run), "--format", "onnx", "-o", str(tmp_path / "m.onnx")], capsys)
    assert f"attention kernel {kernel!r} cannot be exported" in err
    assert not (tmp_path / "m.onnx").exists()


def test_seq2seq_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    err = refused(
        [str(FIXTURES / "seq2seq"), "--format", "onnx", "-o", str(tmp_path / "m.onnx")], capsys
    )
    assert "decoding is a loop over generated tokens" in err


def test_unknown_format_missing_folder_and_not_a_run_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    err = refused(
        [str(FIXTURES / "token"), "--format", "tflite", "-o", str(tmp_path / "m")], capsys
    )
    assert "unknown format 'tflite'; choose one of onnx, torch-export, hf" in err
    err = refused(
        [str(FIXTURES / "token"), "--format", "onnx", "-o", str(tmp_path / "no" / "m.onnx")], capsys
    )
    assert "does not exist" in err
    refused([str(tmp_path), "--format", "onnx", "-o", str(tmp_path / "m.onnx")], capsys)


def test_hf_is_refused_for_a_model_not_fine_tuned_from_bert(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    err = refused(
        [str(FIXTURES / "sequence"), "--format", "hf", "-o", str(tmp_path / "bert")], capsys
    )
    assert (
        "only a model fine-tuned from a BERT checkpoint (model.pretrained) has BERT's shape" in err
    )
    assert not (tmp_path / "bert").exists()


def test_help_names_the_formats(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["export", "--help"])
    out = capsys.readouterr().out
    assert "onnx" in out and "torch-export" in out and "hf" in out


def test_graph_models_are_refused() -> None:
    """torch.export stops at the edge attention's check of the edge list's values."""
    config = model_options(
        architecture="graph", embed_dim=16, num_heads=2, num_layers=1, positional=None
    )
    model = build(config, "token", num_labels=3, feature_dim=3)
    why = refusal(model, "token")
    assert why is not None and why.startswith("a graph model cannot be exported")


@pytest.mark.parametrize("patch_size", [None, 2])
def test_an_image_model_exports_with_a_dynamic_batch(
    tmp_path: Path, patch_size: int | None
) -> None:
    """Pixels (or ViT patches) in: the length is the image's, only the batch varies."""
    from types import SimpleNamespace

    from selfattn.data.vocab import LabelVocabulary
    from selfattn.export import export_run

    config = model_options(
        embed_dim=16, num_heads=2, num_layers=1, ffn_dim=16, positional=None,
        grid_positional="sinusoidal2d", patch_size=patch_size, pooling="cls",
    )  # fmt: skip
    image = {"feature_dim": 1, "max_len": 64, "image_shape": (8, 8, 1)}
    model = build(config, "sequence", num_labels=3, **image).eval()
    task = SimpleNamespace(name="sequence", labels=LabelVocabulary(["0", "1", "2"]))
    path = tmp_path / "image.onnx"
    line = export_run(model, task, 64, "onnx", path)
    assert SUMMARY.match(line) and "inputs features (batch, 64, 1)" in line
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    pixels = torch.rand(5, 64, 1)
    expected = wrap(model).module(pixels).detach().numpy()
    got = session.run(None, {"features": pixels.numpy()})[0]
    assert got.shape == (5, 3) and np.abs(got - expected).max() <= TOLERANCE
