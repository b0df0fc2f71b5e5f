"""BERT-family checkpoints from a local Hugging Face folder into selfattn's own modules
(:class:`~selfattn.models.bert.BertEncoder`: BERT's embeddings and the models' encoder
stack, re-exported here with its :class:`BertConfig`).

The folder is read with ``json`` and ``safetensors`` alone (``config.json``,
``model.safetensors``, as ``save_pretrained`` writes them); ``transformers`` is not needed.

>>> bert = bert_from_folder("all-MiniLM-L6-v2/")
>>> output = bert(input_ids, attention_mask)  # attention_mask: 1 = real token, 0 = padding
>>> output.hidden_states  # embeddings, then each layer: num_layers + 1 tensors (B, L, E)
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file
from torch import Tensor

from selfattn.models.bert import BertConfig, BertEmbeddings, BertEncoder
from selfattn.pretrained.bert_config import (
    BERT_MODEL_TYPES,
    BERT_MODULES,
    CONFIG_FILE,
    DISTILBERT_KEYS,
    DISTILBERT_MODULES,
    WEIGHTS_FILE,
    bert_config_from_file,
    check_layer_count,
    hf_name,
    layer_prefix,
    one_line,
)
from selfattn.pretrained.safetensors_header import CheckpointError
from selfattn.pretrained.weights import pretrained_folder

__all__ = [
    "BERT_MODEL_TYPES",
    "CONFIG_FILE",
    "DISTILBERT_KEYS",
    "WEIGHTS_FILE",
    "BertConfig",
    "BertEmbeddings",
    "BertEncoder",
    "CheckpointError",
    "bert_from_folder",
    "load_bert",
    "parameter_map",
]


def bert_from_folder(folder: str | Path) -> BertEncoder:
    """The :class:`BertEncoder` of a Hugging Face BERT folder (``config.json``,
    ``model.safetensors``), in eval mode, float32.

    Raises:
        CheckpointError: a missing file, a config that is not BERT's, weights that do
            not match the config, or an unreadable safetensors file; one line naming
            the file.
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise CheckpointError(f"{folder}: not a folder")
    model = BertEncoder(bert_config_from_file(folder / CONFIG_FILE))
    weights = read_weights(folder / WEIGHTS_FILE)
    model.load_state_dict(match_weights(weights, model, folder))
    return model.eval()


def load_bert(name_or_folder: str | Path) -> BertEncoder:
    """The BERT checkpoint of a registered name (``"minilm-l6"``, fetched on first use) or
    in a local folder, in eval mode: :func:`bert_from_folder` on
    :func:`~selfattn.pretrained.weights.pretrained_folder`.

    Raises:
        PretrainedError: the name cannot be fetched, or the folder is not a checkpoint
            (:class:`CheckpointError` for its config or weights).
    """
    return bert_from_folder(pretrained_folder(name_or_folder))


def parameter_map(num_layers: int, model_type: str = "bert") -> dict[str, str]:
    """selfattn's parameter name → Hugging Face's (``BertModel``'s, or ``DistilBertModel``'s
    for ``model_type = "distilbert"``), for a ``num_layers`` model.

    The pooler (``pooler.dense``) and pre-training heads (``cls.*``) have no counterpart:
    task heads are selfattn's own.
    """
    distil = model_type == "distilbert"
    names = {
        "embeddings.word_embeddings.weight": "embeddings.word_embeddings.weight",
        "embeddings.position_embeddings.weight": "embeddings.position_embeddings.weight",
        "embeddings.norm.weight": "embeddings.LayerNorm.weight",
        "embeddings.norm.bias": "embeddings.LayerNorm.bias",
    }
    if not distil:
        names["embeddings.token_type_embeddings.weight"] = "embeddings.token_type_embeddings.weight"
    modules = DISTILBERT_MODULES if distil else BERT_MODULES
    layer = layer_prefix(model_type)
    for index in range(num_layers):
        for ours, theirs in modules.items():
            for kind in ("weight", "bias"):
                names[f"encoder.layers.{index}.{ours}.{kind}"] = f"{layer}.{index}.{theirs}.{kind}"
    return names


def read_weights(path: Path) -> dict[str, Tensor]:
    """Every tensor of a safetensors file, under Hugging Face ``BertModel``'s names: a
    task model's ``bert.`` prefix is dropped, and TensorFlow-era ``LayerNorm.gamma`` /
    ``beta`` become ``weight`` / ``bias``."""
    if not path.is_file():
        raise CheckpointError(f"{path}: not a BERT folder: {WEIGHTS_FILE} is missing")
    try:
        raw = load_file(path)
    except (SafetensorError, OSError) as error:
        raise CheckpointError(
            f"{path}: not a readable safetensors file, truncated or corrupt ({one_line(error)})"
        ) from None
    return {hf_name(name): tensor for name, tensor in raw.items()}


def match_weights(
    weights: Mapping[str, Tensor], model: BertEncoder, folder: Path
) -> dict[str, Tensor]:
    """``model``'s state dict filled from ``weights`` (Hugging Face names), float32.

    Raises:
        CheckpointError: a tensor the config needs is missing, has another shape, or the
            file holds more layers than the config says.
    """
    config = model.config
    weights_file, config_file = folder / WEIGHTS_FILE, folder / CONFIG_FILE
    check_layer_count(weights, config.num_hidden_layers, folder, config.model_type)
    expected = model.state_dict()
    state = {}
    for ours, theirs in parameter_map(config.num_hidden_layers, config.model_type).items():
        if theirs not in weights:
            raise CheckpointError(f"{weights_file}: tensor {theirs!r} is missing")
        tensor, shape = weights[theirs], expected[ours].shape
        if tensor.shape != shape:
            raise CheckpointError(
                f"{weights_file}: tensor {theirs!r} has shape {tuple(tensor.shape)} but "
                f"{config_file} implies {tuple(shape)}"
            )
        state[ours] = tensor.to(torch.float32)
    return state
