"""The ONNX → Hugging Face DistilBERT conversion: dequantisation, names and transposes on a
small hand-built graph; the refusals of a graph that is not a DistilBERT; the config read
off the tensors."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from selfattn.pretrained.onnx_distilbert import dequantised_weights, distilbert_config
from selfattn.pretrained.weights import PretrainedError

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

LAYER = "/distilbert/transformer/layer.0"


def quantised(name: str, q: np.ndarray, scale: float, zero: int) -> list[TensorProto]:
    """``name_quantized`` int8 with its one scale and zero point."""
    return [
        numpy_helper.from_array(q.astype(np.int8), f"{name}_quantized"),
        numpy_helper.from_array(np.array(scale, np.float32), f"{name}_scale"),
        numpy_helper.from_array(np.array(zero, np.int8), f"{name}_zero_point"),
    ]


def graph_model(*, with_scale: bool = True, matmul_name: str = f"{LAYER}/attention/q_lin/MatMul"):
    """An embedding table read by a Gather and a (3 → 2) weight read by a MatMul, both int8
    in QDQ form, and a float bias: the pattern of an exported, quantised DistilBERT."""
    rng = np.random.default_rng(0)
    table = rng.integers(-128, 127, size=(5, 3))
    weight = rng.integers(-128, 127, size=(3, 2))  # ONNX MatMul: (in, out)
    initializers = [
        *quantised("distilbert.embeddings.word_embeddings.weight", table, 0.5, 3),
        *quantised("onnx::MatMul_7", weight, 0.25, -2),
        numpy_helper.from_array(
            np.array([1.0, 2.0], np.float32), "distilbert.transformer.layer.0.attention.q_lin.bias"
        ),
    ]
    if not with_scale:
        initializers = [t for t in initializers if t.name != "onnx::MatMul_7_scale"]
    nodes = [
        helper.make_node(
            "DequantizeLinear",
            [
                f"distilbert.embeddings.word_embeddings.weight_{part}"
                for part in ("quantized", "scale", "zero_point")
            ],
            ["table"],
        ),
        helper.make_node(
            "Gather", ["table", "ids"], ["x"], name="/distilbert/embeddings/word_embeddings/Gather"
        ),
        helper.make_node(
            "DequantizeLinear",
            ["onnx::MatMul_7_quantized", "onnx::MatMul_7_scale", "onnx::MatMul_7_zero_point"],
            ["w"],
        ),
        helper.make_node("MatMul", ["x", "w"], ["y"], name=matmul_name),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("ids", TensorProto.INT64, [None])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, 2])],
        initializer=initializers,
    )
    return helper.make_model(graph), table, weight


def test_dequantises_names_and_transposes() -> None:
    model, table, weight = graph_model()
    weights = dequantised_weights(model, source="g.onnx")
    np.testing.assert_allclose(
        weights["distilbert.embeddings.word_embeddings.weight"], (table - 3) * 0.5
    )
    # The MatMul's (in, out) weight, named by its module, as PyTorch's (out, in).
    np.testing.assert_allclose(
        weights["distilbert.transformer.layer.0.attention.q_lin.weight"], ((weight + 2) * 0.25).T
    )
    assert weights["distilbert.transformer.layer.0.attention.q_lin.bias"].tolist() == [1.0, 2.0]
    assert not any(name.endswith(("_scale", "_zero_point", "_quantized")) for name in weights)


def test_refuses_an_int8_tensor_without_its_scale() -> None:
    model, _, _ = graph_model(with_scale=False)
    with pytest.raises(
        PretrainedError,
        match=r"g\.onnx: int8 tensor 'onnx::MatMul_7_quantized' has no 'onnx::MatMul_7_scale'",
    ):
        dequantised_weights(model, source="g.onnx")


def test_refuses_a_matmul_of_no_module() -> None:
    model, _, _ = graph_model(matmul_name="MatMul_42")
    with pytest.raises(PretrainedError, match="cannot tell which module"):
        dequantised_weights(model, source="g.onnx")


def distilbert_tensors(layers: int = 2, dim: int = 8, hidden: int = 16) -> dict[str, np.ndarray]:
    """Every tensor of a DistilBERT of this shape, zeros."""
    tensors = {
        "distilbert.embeddings.word_embeddings.weight": np.zeros((11, dim)),
        "distilbert.embeddings.position_embeddings.weight": np.zeros((7, dim)),
        "distilbert.embeddings.LayerNorm.weight": np.zeros(dim),
        "distilbert.embeddings.LayerNorm.bias": np.zeros(dim),
    }
    for i in range(layers):
        layer = f"distilbert.transformer.layer.{i}."
        for module in ("q_lin", "k_lin", "v_lin", "out_lin"):
            tensors[f"{layer}attention.{module}.weight"] = np.zeros((dim, dim))
            tensors[f"{layer}attention.{module}.bias"] = np.zeros(dim)
        tensors[f"{layer}ffn.lin1.weight"] = np.zeros((hidden, dim))
        tensors[f"{layer}ffn.lin1.bias"] = np.zeros(hidden)
        tensors[f"{layer}ffn.lin2.weight"] = np.zeros((dim, hidden))
        tensors[f"{layer}ffn.lin2.bias"] = np.zeros(dim)
        for norm in ("sa_layer_norm", "output_layer_norm"):
            tensors[f"{layer}{norm}.weight"] = np.zeros(dim)
            tensors[f"{layer}{norm}.bias"] = np.zeros(dim)
    return tensors


def test_config_is_read_off_the_tensors() -> None:
    config = distilbert_config(distilbert_tensors(), head_dim=4, eps=1e-12, source="g.onnx")
    assert (config["vocab_size"], config["dim"], config["n_layers"], config["n_heads"]) == (
        11,
        8,
        2,
        2,
    )
    assert (config["hidden_dim"], config["max_position_embeddings"]) == (16, 7)
    assert config["model_type"] == "distilbert"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            lambda t: t.pop("distilbert.transformer.layer.1.ffn.lin2.bias"),
            "'distilbert.transformer.layer.1.ffn.lin2.bias' is missing",
        ),
        (
            lambda t: t.__setitem__(
                "distilbert.transformer.layer.0.attention.k_lin.weight", np.zeros((8, 9))
            ),
            r"k_lin.weight' has shape \(8, 9\), expected \(8, 8\)",
        ),
        (lambda t: t.pop("distilbert.embeddings.LayerNorm.weight"), "LayerNorm.weight' is missing"),
    ],
)
def test_config_refuses_a_missing_or_misshaped_tensor(change, message: str) -> None:
    tensors = distilbert_tensors()
    change(tensors)
    with pytest.raises(PretrainedError, match=message):
        distilbert_config(tensors, head_dim=4, eps=1e-12, source="g.onnx")


def test_refuses_a_file_that_is_not_onnx(tmp_path: Path) -> None:
    from selfattn.pretrained.onnx_distilbert import convert_distilbert_onnx

    bad = tmp_path / "tagger.onnx"
    bad.write_bytes(b"\x00not onnx at all" * 10)
    with pytest.raises(PretrainedError, match=r"tagger\.onnx: not an ONNX model"):
        convert_distilbert_onnx(bad, tmp_path / "tokenizer.json", tmp_path / "out")
    assert not (tmp_path / "out").exists()


class FetchedSource:
    """A source already in the cache: what :class:`PretrainedWeights` asks of one."""

    package, version, members, download_mb = "pkg", "1.0", ("pkg/model.onnx",), 1.0

    def is_fetched(self) -> bool:
        return True

    def fetch(self) -> list[Path]:
        return []


def test_a_converted_checkpoint_is_converted_once(tmp_path: Path, monkeypatch) -> None:
    """The conversion runs at the first fetch, into a folder of its own in the cache, and
    not again once that folder holds a checkpoint."""
    from selfattn.pretrained.weights import PretrainedWeights

    monkeypatch.setenv("SELFATTN_CACHE", str(tmp_path))
    calls: list[tuple[Path, Path]] = []

    def convert(archive: Path, folder: Path) -> None:
        calls.append((archive, folder))
        folder.mkdir(parents=True)
        for name in ("config.json", "model.safetensors"):
            (folder / name).write_text("{}")

    weights = PretrainedWeights("tiny", "a test", FetchedSource(), "MIT", convert=convert)  # type: ignore[arg-type]
    assert not weights.is_fetched()
    folder = weights.fetch()
    assert folder == tmp_path / "pretrained" / "tiny" and weights.is_fetched()
    assert weights.fetch() == folder
    assert len(calls) == 1 and calls[0][0] == weights.archive_folder
