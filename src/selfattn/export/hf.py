"""A BERT encoder back into a Hugging Face folder: ``config.json``, ``model.safetensors``
under ``BertModel``'s names (the inverse of :func:`selfattn.pretrained.bert.parameter_map`),
and the checkpoint's ``tokenizer.json`` — what ``transformers.BertModel.from_pretrained``
reads."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

from safetensors.torch import save_file
from torch import nn

from selfattn.pretrained.bert import (
    CONFIG_FILE,
    DISTILBERT_KEYS,
    WEIGHTS_FILE,
    BertEncoder,
    parameter_map,
)

TOKENIZER_FILE = "tokenizer.json"


def hf_config(bert: BertEncoder) -> dict[str, Any]:
    """``config.json`` of a ``BertModel`` (or ``DistilBertModel``) with ``bert``'s shape."""
    if bert.config.model_type == "distilbert":
        fields = asdict(bert.config)
        keys = {bert_key: key for key, bert_key in DISTILBERT_KEYS.items()}
        return {
            "architectures": ["DistilBertModel"],
            **{keys[k]: v for k, v in fields.items() if k in keys},
            "model_type": "distilbert",
            "vocab_size": fields["vocab_size"],
            "max_position_embeddings": fields["max_position_embeddings"],
            "sinusoidal_pos_embds": False,
            "initializer_range": 0.02,
            "pad_token_id": 0,
            "torch_dtype": "float32",
        }
    return {
        "architectures": ["BertModel"],
        "model_type": "bert",
        **asdict(bert.config),
        "initializer_range": 0.02,
        "pad_token_id": 0,
        "position_embedding_type": "absolute",
        "torch_dtype": "float32",
        "use_cache": True,
    }


def export_hf(bert: BertEncoder, out_dir: str | Path, tokenizer_json: str | None) -> Path:
    """Write ``bert`` as a Hugging Face BERT folder.

    Args:
        bert: the encoder (a fine-tuned model's ``.bert``).
        out_dir: the folder to write; created if missing (its parent must exist).
        tokenizer_json: the checkpoint's ``tokenizer.json`` text, or ``None`` for none.

    Returns:
        ``out_dir``.

    Raises:
        ValueError: ``out_dir``'s parent folder does not exist, or it is a file.
    """
    folder = Path(out_dir)
    if not folder.parent.is_dir():
        raise ValueError(f"{folder}: its folder {folder.parent} does not exist")
    if folder.exists() and not folder.is_dir():
        raise ValueError(f"{folder}: exists and is not a folder")
    folder.mkdir(exist_ok=True)
    state = bert.state_dict()
    names = parameter_map(bert.config.num_hidden_layers, bert.config.model_type)
    tensors = {theirs: state[ours].detach().float().contiguous() for ours, theirs in names.items()}
    save_file(tensors, folder / WEIGHTS_FILE, metadata={"format": "pt"})
    config = json.dumps(hf_config(bert), indent=2) + "\n"
    (folder / CONFIG_FILE).write_text(config, encoding="utf-8")
    if tokenizer_json is not None:
        (folder / TOKENIZER_FILE).write_text(tokenizer_json, encoding="utf-8")
    return folder


def bert_of(model: nn.Module) -> BertEncoder | None:
    """The :class:`BertEncoder` of a model fine-tuned from a BERT checkpoint, else ``None``
    (found by its ``bert`` attribute, so no task-model class is imported)."""
    bert = getattr(model, "bert", None)
    return bert if isinstance(bert, BertEncoder) else None
