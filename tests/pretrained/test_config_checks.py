"""A BERT folder's config is checked, number by number and against the shapes in its
weights' safetensors header, before any model of it is built: one line naming the field,
the file and the tensor, never an allocation of the config's sizes."""

from __future__ import annotations

import json
import math
import shutil
import struct
import time
from pathlib import Path
from typing import Any

import pytest

from selfattn.pretrained.bert import BertEncoder, CheckpointError, bert_from_folder, parameter_map
from selfattn.pretrained.bert_config import (
    MAX_DIMENSION,
    bert_config_from_dict,
    bert_config_from_file,
    expected_shapes,
)
from selfattn.pretrained.safetensors_header import read_shapes

from ..helpers_data import edit_json

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture
def folder(bert_folder: Path, tmp_path: Path) -> Path:
    for name in ("config.json", "model.safetensors"):
        shutil.copy(bert_folder / name, tmp_path / name)
    return tmp_path


def refused(folder: Path, *words: str) -> str:
    """``from_folder``'s one-line refusal, within two seconds of this process's CPU time
    (nothing was built; not wall time, which grows with whatever else shares the machine)."""
    start = time.process_time()
    with pytest.raises(CheckpointError) as caught:
        bert_from_folder(folder)
    assert time.process_time() - start < 2.0
    message = str(caught.value)
    assert "\n" not in message and all(word in message for word in words), message
    return message


@pytest.mark.parametrize(
    ("field", "value", "tensor"),
    [
        ("vocab_size", 2_000_000_000_000, "embeddings.word_embeddings.weight"),
        ("max_position_embeddings", 10**12, "embeddings.position_embeddings.weight"),
        ("type_vocab_size", 10**12, "embeddings.token_type_embeddings.weight"),
        ("hidden_size", 4 * 10**11, "embeddings.word_embeddings.weight"),
        ("intermediate_size", 10**12, "encoder.layer.0.intermediate.dense.weight"),
        ("num_hidden_layers", 10**12, f"encoder.layer.{10**12 - 1}.attention.self.query"),
    ],
)
def test_a_size_the_weights_do_not_have_names_field_file_and_tensor(
    folder: Path, field: str, value: int, tensor: str
) -> None:
    """vocab_size 2e12 was an out-of-memory traceback: the model was built first."""
    edit_json(folder / "config.json", **{field: value})
    message = refused(folder, f"{folder / 'config.json'}", f"{field} = {value}", tensor)
    assert message.startswith(f"{folder / 'model.safetensors'}: tensor '{tensor}")


@pytest.mark.parametrize(
    ("changes", "words"),
    [
        ({"vocab_size": 2e12}, "vocab_size must be a positive integer, got 2000000000000.0"),
        ({"num_attention_heads": True}, "num_attention_heads must be a positive integer"),
        ({"type_vocab_size": 0}, "type_vocab_size must be a positive integer, got 0"),
        ({"max_position_embeddings": -1}, "max_position_embeddings must be a positive integer"),
        ({"hidden_dropout_prob": math.nan}, "hidden_dropout_prob must be a number in [0, 1)"),
        ({"attention_probs_dropout_prob": 1.5}, "attention_probs_dropout_prob must be a number"),
        ({"layer_norm_eps": math.inf}, "layer_norm_eps must be a number in (0, 1), got inf"),
        ({"layer_norm_eps": 0}, "layer_norm_eps must be a number in (0, 1), got 0"),
        ({"hidden_act": ["gelu"]}, "hidden_act ['gelu'] has no exact counterpart"),
    ],
)
def test_a_number_that_is_not_a_size_or_rate_is_refused(
    folder: Path, changes: dict[str, Any], words: str
) -> None:
    edit_json(folder / "config.json", **changes)
    assert refused(folder, words).startswith(f"{folder / 'config.json'}: ")


def test_without_weights_to_compare_a_size_is_still_bounded() -> None:
    raw = json.loads(json.dumps({"model_type": "bert", "hidden_size": 8}))
    raw.update(num_hidden_layers=1, num_attention_heads=2, intermediate_size=8)
    bert_config_from_dict({**raw, "vocab_size": MAX_DIMENSION})
    with pytest.raises(CheckpointError, match=r"^c.json: vocab_size 16777217 is past the largest"):
        bert_config_from_dict({**raw, "vocab_size": MAX_DIMENSION + 1}, source="c.json")


def _rewrite_header(path: Path, change: dict[str, Any]) -> None:
    """The safetensors file at ``path`` with header entries replaced by ``change``."""
    data = path.read_bytes()
    length = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8 : 8 + length])
    header.update(change)
    text = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(text)) + text + data[8 + length :])


@pytest.mark.parametrize(
    "entry",
    [
        {"dtype": "F32", "shape": [2_000_000_000_000, 32], "data_offsets": [0, 128]},
        {"dtype": "F32", "shape": [4, 32], "data_offsets": [0, 10**15]},
        {"dtype": "F99", "shape": [4, 32], "data_offsets": [0, 512]},
        {"dtype": "F32", "shape": [4.0, 32], "data_offsets": [0, 512]},
        {"dtype": "F32", "shape": [4, 32]},
        "F32",
    ],
)
def test_a_header_that_lies_about_a_tensor_is_corrupt(folder: Path, entry: Any) -> None:
    path = folder / "model.safetensors"
    _rewrite_header(path, {"embeddings.word_embeddings.weight": entry})
    message = refused(folder, "truncated or corrupt")
    assert message.startswith(f"{path}: not a readable safetensors file")


@pytest.mark.parametrize("length", [2**63, 10**8 + 1, 1])
def test_a_header_length_past_the_file_is_corrupt(folder: Path, length: int) -> None:
    path = folder / "model.safetensors"
    path.write_bytes(struct.pack("<Q", length) + path.read_bytes()[8:])
    refused(folder, f"{path}: not a readable safetensors file, truncated or corrupt")


def test_the_header_shapes_are_the_tensors_the_model_loads(bert_folder: Path) -> None:
    """The shapes checked before building are exactly those of the built model's
    parameters, under Hugging Face's names."""
    config = bert_config_from_file(bert_folder / "config.json")
    expected = {name: shape for name, (shape, _) in expected_shapes(config).items()}
    model = BertEncoder(config).state_dict()
    built = {theirs: tuple(model[ours].shape) for ours, theirs in parameter_map(2).items()}
    assert expected == built
    shapes = read_shapes(bert_folder / "model.safetensors")
    assert {name: shapes[name] for name in expected} == expected
