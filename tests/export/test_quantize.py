"""``selfattn export --format onnx --quantize int8``: int8 weights by ONNX Runtime's dynamic
quantisation, kept only when the dev accuracy stays within half a point of float32's."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import onnx
import onnxruntime
import pytest
import torch

from selfattn.cli.main import main
from selfattn.export import quantize
from selfattn.export.exporters import exportable_of
from selfattn.tasks import Predictor

from .conftest import FIXTURES, RunMaker
from .test_export import refused

pytestmark = pytest.mark.usefixtures("one_thread")

INT8_SUMMARY = re.compile(
    r"^wrote (?P<path>\S+) \(onnx, opset \d+, int8 weights: (?P<mb>[\d.]+) MB, float32 "
    r"(?P<float_mb>[\d.]+) MB\): dev accuracy int8 (?P<int8>[\d.]+), float32 "
    r"(?P<float32>[\d.]+) \((?P<change>[+-][\d.]+) points; kept: within 0\.5\); "
    r"inputs token_ids \(batch, length\), padding_mask \(batch, length\); "
    r"outputs logits \(batch, 2\)$"
)


def test_int8_export_has_int8_weights_close_outputs_and_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], trained: RunMaker
) -> None:
    run, out = trained("reviews"), tmp_path / "reviews.int8.onnx"
    capsys.readouterr()
    assert main(["export", str(run), "--format", "onnx", "-o", str(out), "--quantize", "int8"]) == 0
    line = capsys.readouterr().out.strip()
    match = INT8_SUMMARY.match(line)
    assert match, line
    int8, float32 = float(match["int8"]), float(match["float32"])
    assert float(match["change"]) == pytest.approx(100 * (int8 - float32), abs=0.01)
    assert 100 * (float32 - int8) <= quantize.MAX_DROP
    assert float(match["mb"]) < float(match["float_mb"])

    # Every matrix product's weight is stored as int8, one scale per output channel; no
    # float matrix is left to multiply.
    graph = onnx.load(out).graph
    weights = {init.name: init for init in graph.initializer}
    products = [node for node in graph.node if node.op_type == "MatMulInteger"]
    assert products
    for node in products:  # (in, out) int8 weights, a zero point (and scale) per column
        weight = weights[node.input[1]]
        assert weight.data_type == onnx.TensorProto.INT8, node.input[1]
        assert list(weights[node.input[3]].dims) == [weight.dims[1]], node.input[3]
    for node in graph.node:
        if node.op_type in ("MatMul", "Gemm"):
            floats = [weights[name] for name in node.input if name in weights]
            assert not any(w.data_type == onnx.TensorProto.FLOAT for w in floats), node.name
    assert any(w.data_type == onnx.TensorProto.UINT8 for w in weights.values())  # embedding

    # Its logits follow the float32 model's on a few padded batches.
    predictor = Predictor(run)
    exportable = exportable_of(predictor.model.eval(), predictor.task)
    session = onnxruntime.InferenceSession(str(out), providers=["CPUExecutionProvider"])
    generator = torch.Generator().manual_seed(3)
    for batch_size, length in ((1, 4), (3, 9), (4, 20)):
        inputs = exportable.example_inputs(batch_size, length, generator=generator)
        with torch.no_grad():
            expected = exportable.module(*inputs).numpy()
        feed = {
            spec.name: value.numpy() for spec, value in zip(exportable.inputs, inputs, strict=True)
        }
        got = session.run(None, feed)[0]
        assert got.shape == expected.shape
        np.testing.assert_allclose(got, expected, rtol=0, atol=0.05 * np.abs(expected).max())

    sidecar = json.loads((tmp_path / "reviews.int8.onnx.json").read_text(encoding="utf-8"))
    assert sidecar["file"] == "reviews.int8.onnx" and sidecar["weights"] == "int8"
    assert sidecar["quantization"]["dev"] == {
        "metric": "accuracy",
        "float32": pytest.approx(float32, abs=1e-4),
        "int8": pytest.approx(int8, abs=1e-4),
    }
    assert sidecar["labels"] == predictor.task.labels.labels
    assert [i["name"] for i in sidecar["inputs"]] == ["token_ids", "padding_mask"]


def test_int8_that_loses_too_much_is_refused_and_leaves_no_file(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    trained: RunMaker,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With the allowed loss set below any result, the int8 file is refused in one line
    and neither it, its sidecar nor the scratch folder is left behind."""
    monkeypatch.setattr(quantize, "MAX_DROP", -1000.0)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setattr("tempfile.tempdir", str(scratch))
    out = tmp_path / "out" / "reviews.int8.onnx"
    out.parent.mkdir()
    err = refused(
        [str(trained("reviews")), "--format", "onnx", "-o", str(out), "--quantize", "int8"],
        capsys,
    )
    assert re.search(r"int8 weights cost -?[\d.]+ points \(dev accuracy int8 [\d.]+, ", err), err
    assert f"{out} not written; export without --quantize for float32" in err
    assert list(out.parent.iterdir()) == [] and list(scratch.iterdir()) == []


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--format", "onnx", "--quantize", "int4"], "unknown --quantize 'int4'; choose int8"),
        (
            ["--format", "torch-export", "--quantize", "int8"],
            "--quantize int8 is for --format onnx (ONNX Runtime's int8 kernels), not torch-export",
        ),
        (["--format", "hf", "--quantize", "int8"], "is for --format onnx"),
    ],
)
def test_other_quantizations_and_formats_are_refused(
    flags: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "m.onnx"
    err = refused([str(FIXTURES / "sequence"), "-o", str(out), *flags], capsys)
    assert message in err
    assert list(tmp_path.iterdir()) == []


def test_the_main_metric_and_what_int8_loses() -> None:
    """A label set's F1 first, then accuracy, then a regression's RMSE (its loss in
    percent of float32's)."""
    assert quantize.main_metric({"loss": 1.0, "accuracy": 0.5, "set_f1": 0.4}) == "set_f1"
    assert quantize.main_metric({"loss": 1.0, "accuracy": 0.5}) == "accuracy"
    assert quantize.main_metric({"loss": 1.0, "rmse": 0.7, "mae": 0.5}) == "rmse"
    assert quantize.drop("accuracy", 0.9, 0.895) == pytest.approx(0.5)
    assert quantize.drop("accuracy", 0.9, 0.91) == pytest.approx(-1.0)
    assert quantize.drop("rmse", 2.0, 2.02) == pytest.approx(1.0)
