"""A Hugging Face BERT ``config.json`` read as a :class:`~selfattn.models.bert.BertConfig`
(:func:`bert_config_from_file`), every number checked,
and compared with the shapes of the tensors in the ``model.safetensors`` beside it, from
that file's header (:mod:`.safetensors_header`), before any model of it is built: a config
that says ``vocab_size`` 2e12 is one line naming the field, not a 16 TB allocation.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from selfattn.models.bert import BERT_ACTIVATIONS, BertConfig
from selfattn.pretrained.safetensors_header import CheckpointError, read_shapes

__all__ = [
    "BERT_MODEL_TYPES",
    "BERT_MODULES",
    "CONFIG_FILE",
    "DISTILBERT_KEYS",
    "DISTILBERT_MODULES",
    "MAX_DIMENSION",
    "WEIGHTS_FILE",
    "BertConfig",
    "bert_config_from_dict",
    "bert_config_from_file",
    "check_layer_count",
    "check_shapes",
    "expected_shapes",
    "hf_name",
    "layer_prefix",
    "one_line",
]

CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.safetensors"

#: ``model_type`` values whose checkpoints have BERT's layout and arithmetic. DistilBERT is
#: BERT without token types (other key and tensor names: :data:`DISTILBERT_KEYS`,
#: :data:`DISTILBERT_MODULES`). RoBERTa is left out on purpose: its positions start at
#: ``pad_token_id + 1``.
BERT_MODEL_TYPES = frozenset({"bert", "distilbert"})

#: A DistilBERT ``config.json`` key → BERT's.
DISTILBERT_KEYS = {
    "dim": "hidden_size",
    "n_layers": "num_hidden_layers",
    "n_heads": "num_attention_heads",
    "hidden_dim": "intermediate_size",
    "activation": "hidden_act",
    "dropout": "hidden_dropout_prob",
    "attention_dropout": "attention_probs_dropout_prob",
}

#: A block's modules: selfattn's name → ``BertModel``'s.
BERT_MODULES = {
    "self_attn.q_proj": "attention.self.query",
    "self_attn.k_proj": "attention.self.key",
    "self_attn.v_proj": "attention.self.value",
    "self_attn.out_proj": "attention.output.dense",
    "norm1": "attention.output.LayerNorm",
    "feedforward.in_proj": "intermediate.dense",
    "feedforward.out_proj": "output.dense",
    "norm2": "output.LayerNorm",
}
#: A block's modules: selfattn's name → ``DistilBertModel``'s.
DISTILBERT_MODULES = {
    "self_attn.q_proj": "attention.q_lin",
    "self_attn.k_proj": "attention.k_lin",
    "self_attn.v_proj": "attention.v_lin",
    "self_attn.out_proj": "attention.out_lin",
    "norm1": "sa_layer_norm",
    "feedforward.in_proj": "ffn.lin1",
    "feedforward.out_proj": "ffn.lin2",
    "norm2": "output_layer_norm",
}


def layer_prefix(model_type: str) -> str:
    """The name before each block's index in the weights: ``encoder.layer`` (BERT) or
    ``transformer.layer`` (DistilBERT)."""
    return "transformer.layer" if model_type == "distilbert" else "encoder.layer"


#: The largest size a config may give any dimension (2**24; the largest BERT-family
#: vocabularies are about 250,000 words). The weights bound it too: each size must equal
#: its tensors' shape in the safetensors header, checked before anything is built.
MAX_DIMENSION = 16_777_216


def bert_config_from_file(path: str | Path) -> BertConfig:
    """Read a ``config.json`` and, where the ``model.safetensors`` beside it exists,
    compare every size with its tensors' shapes in that file's header (the tensors
    are not read); every problem is a one-line :class:`CheckpointError`."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"{path}: not a BERT folder: {CONFIG_FILE} is missing")
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as error:
        raise CheckpointError(f"{path}: not valid JSON ({one_line(error)})") from None
    if not isinstance(raw, dict):
        raise CheckpointError(f"{path}: expected a JSON object")
    weights = path.parent / WEIGHTS_FILE
    shapes = read_shapes(weights) if weights.is_file() else None
    return bert_config_from_dict(raw, source=path, shapes=shapes)


def bert_config_from_dict(
    raw: Mapping[str, Any],
    *,
    source: str | Path = CONFIG_FILE,
    shapes: Mapping[str, tuple[int, ...]] | None = None,
) -> BertConfig:
    """The config in ``raw`` (a parsed ``config.json``); ``source`` names it in errors.

    Args:
        raw: the parsed JSON.
        source: the file, for messages; its folder holds the weights.
        shapes: the weights' tensor shapes by name
            (:func:`~.safetensors_header.read_shapes`), each compared with the size
            the config gives it (:func:`check_shapes`); ``None``: not compared.
    """
    model_type = raw.get("model_type")
    if model_type not in BERT_MODEL_TYPES:
        raise CheckpointError(
            f"{source}: model_type {model_type!r} is not a BERT-family encoder; "
            f"expected one of {sorted(BERT_MODEL_TYPES)}"
        )
    if model_type == "distilbert":
        raw = distilbert_as_bert(raw, source=source)
    position_type = raw.get("position_embedding_type", "absolute")
    if position_type != "absolute":
        raise CheckpointError(
            f"{source}: position_embedding_type {position_type!r} is not supported; only 'absolute'"
        )
    if raw.get("is_decoder") or raw.get("add_cross_attention"):
        raise CheckpointError(f"{source}: a BERT decoder (is_decoder / add_cross_attention)")
    fields = {name: raw[name] for name in BertConfig.__dataclass_fields__ if name in raw}
    missing = [name for name in _REQUIRED if name not in fields]
    if missing:
        raise CheckpointError(f"{source}: missing {', '.join(missing)}")
    _check_numbers(fields, source)
    config = BertConfig(**fields)
    if shapes is not None:  # first, so that a wrong size names the tensor it disagrees with
        check_shapes(config, shapes, Path(source).parent)
    too_large = [name for name in _SIZES if getattr(config, name) > MAX_DIMENSION]
    if too_large:
        value = getattr(config, too_large[0])
        raise CheckpointError(
            f"{source}: {too_large[0]} {value} is past the largest size read, {MAX_DIMENSION:,}"
        )
    if not isinstance(config.hidden_act, str) or config.hidden_act not in BERT_ACTIVATIONS:
        raise CheckpointError(
            f"{source}: hidden_act {config.hidden_act!r} has no exact counterpart here; "
            f"supported: {sorted(BERT_ACTIVATIONS)}"
        )
    if config.hidden_size % config.num_attention_heads:
        raise CheckpointError(
            f"{source}: hidden_size ({config.hidden_size}) is not divisible by "
            f"num_attention_heads ({config.num_attention_heads})"
        )
    return config


_REQUIRED = (
    "vocab_size",
    "hidden_size",
    "num_hidden_layers",
    "num_attention_heads",
    "intermediate_size",
)
_SIZES = (*_REQUIRED, "max_position_embeddings", "type_vocab_size")
_RATES = ("hidden_dropout_prob", "attention_probs_dropout_prob")


def distilbert_as_bert(raw: Mapping[str, Any], *, source: str | Path) -> dict[str, Any]:
    """A DistilBERT ``config.json`` under BERT's keys: no token types, ε 1e-12 (fixed in
    DistilBERT's code, not in its config).

    Raises:
        CheckpointError: sinusoidal positions (``sinusoidal_pos_embds``), which this
            loader does not build.
    """
    if raw.get("sinusoidal_pos_embds"):
        raise CheckpointError(
            f"{source}: a DistilBERT with sinusoidal_pos_embds = true is not supported; "
            "only learned positions"
        )
    bert = {DISTILBERT_KEYS.get(key, key): value for key, value in raw.items()}
    return {**bert, "type_vocab_size": 0, "layer_norm_eps": 1e-12, "model_type": "distilbert"}


def _check_numbers(fields: Mapping[str, Any], source: str | Path) -> None:
    """Refuse a size that is not a positive integer (a DistilBERT's ``type_vocab_size`` is
    0: it has none), a dropout rate outside [0, 1) or an ε outside (0, 1), NaN and
    infinities included."""
    segments = fields.get("model_type") != "distilbert"
    for name in _SIZES if segments else tuple(n for n in _SIZES if n != "type_vocab_size"):
        value = fields.get(name, 1)
        if type(value) is not int or value < 1:
            raise CheckpointError(f"{source}: {name} must be a positive integer, got {value!r}")
    bounds = {name: (0.0, 1.0, "[0, 1)") for name in _RATES}
    bounds["layer_norm_eps"] = (math.ulp(0.0), 1.0, "(0, 1)")
    for name, (low, high, shown) in bounds.items():
        value = fields.get(name, low)
        number = type(value) in (int, float)
        if not (number and math.isfinite(value) and low <= value < high):
            raise CheckpointError(f"{source}: {name} must be a number in {shown}, got {value!r}")


def expected_shapes(config: BertConfig) -> dict[str, tuple[tuple[int, ...], tuple[str, ...]]]:
    """Each tensor :func:`parameter_map` names (Hugging Face's names), with the shape
    ``config`` implies and the config field that gives each of its sizes."""
    hidden, inner = "hidden_size", "intermediate_size"
    fields: dict[str, tuple[str, ...]] = {
        "embeddings.word_embeddings.weight": ("vocab_size", hidden),
        "embeddings.position_embeddings.weight": ("max_position_embeddings", hidden),
        "embeddings.LayerNorm.weight": (hidden,),
        "embeddings.LayerNorm.bias": (hidden,),
    }
    if config.type_vocab_size:
        fields["embeddings.token_type_embeddings.weight"] = ("type_vocab_size", hidden)
    linears = {  # (out, in) of each linear layer of a block, by selfattn's module name
        "self_attn.q_proj": (hidden, hidden),
        "self_attn.k_proj": (hidden, hidden),
        "self_attn.v_proj": (hidden, hidden),
        "self_attn.out_proj": (hidden, hidden),
        "feedforward.in_proj": (inner, hidden),
        "feedforward.out_proj": (hidden, inner),
    }
    modules = DISTILBERT_MODULES if config.model_type == "distilbert" else BERT_MODULES
    prefix = layer_prefix(config.model_type)
    for index in range(config.num_hidden_layers):
        layer = f"{prefix}.{index}"
        for module, (out, into) in linears.items():
            fields[f"{layer}.{modules[module]}.weight"] = (out, into)
            fields[f"{layer}.{modules[module]}.bias"] = (out,)
        for norm in ("norm1", "norm2"):
            fields[f"{layer}.{modules[norm]}.weight"] = (hidden,)
            fields[f"{layer}.{modules[norm]}.bias"] = (hidden,)
    return {
        name: (tuple(getattr(config, field) for field in dims), dims)
        for name, dims in fields.items()
    }


def check_shapes(config: BertConfig, shapes: Mapping[str, tuple[int, ...]], folder: Path) -> None:
    """Compare ``config`` with the shapes of the tensors in ``folder``'s weights (from
    the safetensors header, :func:`~.safetensors_header.read_shapes`), before a model is
    built.

    Raises:
        CheckpointError: a tensor is missing, the file holds more layers than the config
            says, or a tensor's shape is not what the config implies; one line naming the
            weights file, the tensor, the config file and the field.
    """
    weights_file, config_file = folder / WEIGHTS_FILE, folder / CONFIG_FILE
    shapes = {hf_name(name): shape for name, shape in shapes.items()}
    layers = config.num_hidden_layers
    check_layer_count(shapes, layers, folder, config.model_type)
    modules = DISTILBERT_MODULES if config.model_type == "distilbert" else BERT_MODULES
    last = f"{layer_prefix(config.model_type)}.{layers - 1}.{modules['self_attn.q_proj']}.weight"
    if last not in shapes:  # before listing every layer's tensors
        raise CheckpointError(
            f"{weights_file}: tensor {last!r} is missing ({config_file} says "
            f"num_hidden_layers = {layers})"
        )
    for name, (expected, dims) in expected_shapes(config).items():
        if name not in shapes:
            raise CheckpointError(f"{weights_file}: tensor {name!r} is missing")
        shape = shapes[name]
        if shape != expected:
            wrong = [d for d, n, m in zip(dims, expected, shape, strict=False) if n != m]
            field = wrong[0] if wrong else dims[0]
            raise CheckpointError(
                f"{weights_file}: tensor {name!r} has shape {shape} but {config_file} "
                f"implies {expected} ({field} = {getattr(config, field)})"
            )


def check_layer_count(
    names: Mapping[str, object], layers: int, folder: Path, model_type: str = "bert"
) -> None:
    """Refuse weights holding a layer past the config's ``num_hidden_layers``."""
    extra_layer = f"{layer_prefix(model_type)}.{layers}."
    if any(name.startswith(extra_layer) for name in names):
        raise CheckpointError(
            f"{folder / WEIGHTS_FILE}: holds more than the {layers} layers "
            f"{folder / CONFIG_FILE} says (num_hidden_layers)"
        )


def hf_name(name: str) -> str:
    """A tensor's name in Hugging Face ``BertModel`` (or ``DistilBertModel``): a task
    model's ``bert.`` (``distilbert.``) prefix dropped, TensorFlow-era ``LayerNorm.gamma`` /
    ``beta`` as ``weight`` / ``bias``."""
    name = (
        name.removeprefix("bert.")
        .removeprefix("distilbert.")
        .replace("LayerNorm.gamma", "LayerNorm.weight")
    )
    return name.replace("LayerNorm.beta", "LayerNorm.bias")


def one_line(error: BaseException) -> str:
    """An exception's message on one line."""
    return " ".join(str(error).split())
