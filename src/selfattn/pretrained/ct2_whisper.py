"""A CTranslate2 Whisper → a Hugging Face Whisper folder (``config.json``,
``model.safetensors``, ``tokenizer.json``), the layout :mod:`.whisper` reads.

A Whisper spec fuses projections that Hugging Face keeps apart: self-attention's q, k and
v are one ``linear_0`` ``(3E, E)`` (k's bias stored as zeros: Whisper's k has none), and
cross-attention's k and v are one ``linear_1`` ``(2E, E)``; :func:`whisper_state_dict`
splits them and names every tensor as ``WhisperForConditionalGeneration`` does, float32.
The model's sizes are read off the tensors, never assumed; the output projection stays
tied to the token embedding.

>>> convert_ct2_whisper(["model.bin.part1", "model.bin.part2"], "whisper-base/",
...                     tokenizer="tokenizer.json", ct2_config="config.json")
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors.torch import save_file

from selfattn.pretrained.ctranslate2 import CT2Model, read_ct2
from selfattn.pretrained.errors import PretrainedError

__all__ = [
    "WHISPER_SPECIALS",
    "convert_ct2_whisper",
    "whisper_hf_config",
    "whisper_specials",
    "whisper_state_dict",
]

#: Whisper's special tokens that the task prefix and the decoding stop need.
WHISPER_SPECIALS = ("<|endoftext|>", "<|startoftranscript|>", "<|transcribe|>", "<|notimestamps|>")


def _layer_count(model: CT2Model, stack: str) -> int:
    """How many ``{stack}/layer_{i}`` the model holds (they must run 0 … n − 1)."""
    found = {
        int(match.group(1))
        for name in model.variables
        if (match := re.match(rf"{stack}/layer_(\d+)/", name))
    }
    if found != set(range(len(found))):
        raise PretrainedError(f"{stack} layers are not numbered 0 … n − 1: {sorted(found)}")
    return len(found)


class _Tensors:
    """Takes CT2 variables by name, checks their shapes, keeps them as float32 tensors."""

    def __init__(self, model: CT2Model, source: str) -> None:
        self.model, self.source = model, source
        self.out: dict[str, torch.Tensor] = {}

    def array(self, name: str, shape: tuple[int, ...] | None = None) -> np.ndarray:
        values = self.model.get(name)
        if values is None:
            raise PretrainedError(f"{self.source}: no variable {name!r} (not a Whisper model?)")
        if shape is not None and tuple(values.shape) != shape:
            raise PretrainedError(
                f"{self.source}: variable {name!r} has shape {list(values.shape)}, "
                f"expected {list(shape)}"
            )
        return values

    def put(self, hf_name: str, values: np.ndarray) -> None:
        self.out[hf_name] = torch.from_numpy(np.array(values, dtype=np.float32))  # a copy

    def copy(self, name: str, hf_name: str, shape: tuple[int, ...]) -> None:
        self.put(hf_name, self.array(name, shape))

    def linear(self, name: str, hf_name: str, out_dim: int, in_dim: int) -> None:
        self.copy(f"{name}/weight", f"{hf_name}.weight", (out_dim, in_dim))
        self.copy(f"{name}/bias", f"{hf_name}.bias", (out_dim,))

    def norm(self, name: str, hf_name: str, dim: int) -> None:
        self.copy(f"{name}/gamma", f"{hf_name}.weight", (dim,))
        self.copy(f"{name}/beta", f"{hf_name}.bias", (dim,))

    def fused(self, name: str, hf_prefix: str, parts: Sequence[str], dim: int) -> None:
        """A fused ``(n·E, E)`` projection split into ``parts`` (``k`` gets no bias)."""
        weight = self.array(f"{name}/weight", (len(parts) * dim, dim))
        bias = self.array(f"{name}/bias", (len(parts) * dim,))
        for index, part in enumerate(parts):
            rows = slice(index * dim, (index + 1) * dim)
            self.put(f"{hf_prefix}.{part}_proj.weight", weight[rows])
            if part != "k":
                self.put(f"{hf_prefix}.{part}_proj.bias", bias[rows])


def _heads(model: CT2Model, stack: str, source: str) -> int:
    values = model.get(f"{stack}/num_heads")
    if values is None or values.size != 1:
        raise PretrainedError(f"{source}: no scalar {stack}/num_heads")
    return int(values.reshape(()))


def whisper_state_dict(model: CT2Model, *, source: str = "model.bin") -> dict[str, torch.Tensor]:
    """The tensors of a CTranslate2 Whisper under ``WhisperForConditionalGeneration``'s
    names, float32; the output projection is left out (tied to the token embedding).

    Raises:
        PretrainedError: not a Whisper spec, a variable missing or of the wrong shape.
    """
    if model.spec != "WhisperSpec":
        raise PretrainedError(f"{source}: a CTranslate2 {model.spec}, not a WhisperSpec")
    take = _Tensors(model, source)
    conv1 = take.array("encoder/conv1/weight")
    if conv1.ndim != 3:
        raise PretrainedError(f"{source}: encoder/conv1/weight has shape {list(conv1.shape)}")
    dim, mels, width = (int(n) for n in conv1.shape)
    take.copy("encoder/conv1/weight", "model.encoder.conv1.weight", (dim, mels, width))
    take.copy("encoder/conv1/bias", "model.encoder.conv1.bias", (dim,))
    take.copy("encoder/conv2/weight", "model.encoder.conv2.weight", (dim, dim, width))
    take.copy("encoder/conv2/bias", "model.encoder.conv2.bias", (dim,))
    sources = int(take.array("encoder/position_encodings/encodings").shape[0])
    take.copy(
        "encoder/position_encodings/encodings",
        "model.encoder.embed_positions.weight",
        (sources, dim),
    )
    ffn = int(take.array("encoder/layer_0/ffn/linear_0/weight").shape[0])
    for index in range(_layer_count(model, "encoder")):
        ct2, hf = f"encoder/layer_{index}", f"model.encoder.layers.{index}"
        take.norm(f"{ct2}/self_attention/layer_norm", f"{hf}.self_attn_layer_norm", dim)
        take.fused(f"{ct2}/self_attention/linear_0", f"{hf}.self_attn", "qkv", dim)
        take.linear(f"{ct2}/self_attention/linear_1", f"{hf}.self_attn.out_proj", dim, dim)
        _feed_forward(take, ct2, hf, dim, ffn)
    take.norm("encoder/layer_norm", "model.encoder.layer_norm", dim)

    vocab = int(take.array("decoder/embeddings/weight").shape[0])
    take.copy("decoder/embeddings/weight", "model.decoder.embed_tokens.weight", (vocab, dim))
    targets = int(take.array("decoder/position_encodings/encodings").shape[0])
    take.copy(
        "decoder/position_encodings/encodings",
        "model.decoder.embed_positions.weight",
        (targets, dim),
    )
    for index in range(_layer_count(model, "decoder")):
        ct2, hf = f"decoder/layer_{index}", f"model.decoder.layers.{index}"
        take.norm(f"{ct2}/self_attention/layer_norm", f"{hf}.self_attn_layer_norm", dim)
        take.fused(f"{ct2}/self_attention/linear_0", f"{hf}.self_attn", "qkv", dim)
        take.linear(f"{ct2}/self_attention/linear_1", f"{hf}.self_attn.out_proj", dim, dim)
        take.norm(f"{ct2}/attention/layer_norm", f"{hf}.encoder_attn_layer_norm", dim)
        take.linear(f"{ct2}/attention/linear_0", f"{hf}.encoder_attn.q_proj", dim, dim)
        take.fused(f"{ct2}/attention/linear_1", f"{hf}.encoder_attn", "kv", dim)
        take.linear(f"{ct2}/attention/linear_2", f"{hf}.encoder_attn.out_proj", dim, dim)
        _feed_forward(take, ct2, hf, dim, ffn)
    take.norm("decoder/layer_norm", "model.decoder.layer_norm", dim)
    projection = model.get("decoder/projection/weight")
    if projection is not None and not np.array_equal(
        projection, take.array("decoder/embeddings/weight")
    ):
        raise PretrainedError(
            f"{source}: decoder/projection/weight is not the token embedding; only a tied "
            "output projection is converted"
        )
    return take.out


def _feed_forward(take: _Tensors, ct2: str, hf: str, dim: int, ffn: int) -> None:
    take.norm(f"{ct2}/ffn/layer_norm", f"{hf}.final_layer_norm", dim)
    take.linear(f"{ct2}/ffn/linear_0", f"{hf}.fc1", ffn, dim)
    take.linear(f"{ct2}/ffn/linear_1", f"{hf}.fc2", dim, ffn)


def whisper_hf_config(
    model: CT2Model,
    state: Mapping[str, torch.Tensor],
    specials: Mapping[str, int],
    ct2_config: Mapping[str, Any],
) -> dict[str, Any]:
    """The ``config.json`` of a ``WhisperForConditionalGeneration`` with ``state``'s sizes,
    the special tokens' ids and the CTranslate2 config's suppressed tokens."""
    dim, mels, _ = state["model.encoder.conv1.weight"].shape
    eot = specials["<|endoftext|>"]
    return {
        "model_type": "whisper",
        "architectures": ["WhisperForConditionalGeneration"],
        "vocab_size": int(state["model.decoder.embed_tokens.weight"].shape[0]),
        "num_mel_bins": int(mels),
        "d_model": int(dim),
        "encoder_layers": _layer_count(model, "encoder"),
        "encoder_attention_heads": _heads(model, "encoder", "model.bin"),
        "encoder_ffn_dim": int(state["model.encoder.layers.0.fc1.weight"].shape[0]),
        "decoder_layers": _layer_count(model, "decoder"),
        "decoder_attention_heads": _heads(model, "decoder", "model.bin"),
        "decoder_ffn_dim": int(state["model.decoder.layers.0.fc1.weight"].shape[0]),
        "max_source_positions": int(state["model.encoder.embed_positions.weight"].shape[0]),
        "max_target_positions": int(state["model.decoder.embed_positions.weight"].shape[0]),
        "activation_function": "gelu",
        "scale_embedding": False,
        "tie_word_embeddings": True,
        "pad_token_id": eot,
        "bos_token_id": eot,
        "eos_token_id": eot,
        "decoder_start_token_id": specials["<|startoftranscript|>"],
        "suppress_tokens": [int(i) for i in ct2_config.get("suppress_ids", [])],
        "begin_suppress_tokens": [int(i) for i in ct2_config.get("suppress_ids_begin", [])],
        "torch_dtype": "float32",
    }


def whisper_specials(tokenizer_path: Path) -> dict[str, int]:
    """Every added token of a Whisper ``tokenizer.json`` by its text (``<|en|>`` → 50259).

    Raises:
        PretrainedError: the file is not a tokenizer, or lacks one of
            :data:`WHISPER_SPECIALS` or a language token.
    """
    try:
        added = json.loads(tokenizer_path.read_text(encoding="utf-8"))["added_tokens"]
        specials = {str(token["content"]): int(token["id"]) for token in added}
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise PretrainedError(
            f"{tokenizer_path}: not a tokenizer.json ({type(error).__name__})"
        ) from None
    missing = [token for token in WHISPER_SPECIALS if token not in specials]
    if missing or "<|en|>" not in specials:
        raise PretrainedError(
            f"{tokenizer_path}: lacks Whisper's special tokens {missing or ['<|en|>']}"
        )
    return specials


def _generation_config(config: Mapping[str, Any], specials: Mapping[str, int]) -> dict[str, Any]:
    """What ``WhisperForConditionalGeneration.generate`` reads besides the model config."""
    languages = {
        token: token_id
        for token, token_id in specials.items()
        if re.fullmatch(r"<\|[a-z]{2,3}(?:-[A-Za-z]+)?\|>", token) and token != "<|nocaptions|>"
    }
    return {
        "decoder_start_token_id": config["decoder_start_token_id"],
        "bos_token_id": config["bos_token_id"],
        "eos_token_id": config["eos_token_id"],
        "pad_token_id": config["pad_token_id"],
        "max_length": config["max_target_positions"],
        "suppress_tokens": config["suppress_tokens"],
        "begin_suppress_tokens": config["begin_suppress_tokens"],
        "no_timestamps_token_id": specials["<|notimestamps|>"],
        "is_multilingual": True,
        "lang_to_id": languages,
        "task_to_id": {
            "transcribe": specials["<|transcribe|>"],
            **({"translate": specials["<|translate|>"]} if "<|translate|>" in specials else {}),
        },
    }


#: Whisper's front end, as ``WhisperFeatureExtractor`` reads it from the folder.
_PREPROCESSOR = {
    "feature_extractor_type": "WhisperFeatureExtractor",
    "processor_class": "WhisperProcessor",
    "sampling_rate": 16000,
    "hop_length": 160,
    "n_fft": 400,
    "chunk_length": 30,
    "n_samples": 480000,
    "nb_max_frames": 3000,
    "padding_side": "right",
    "padding_value": 0.0,
    "return_attention_mask": False,
}


def convert_ct2_whisper(
    parts: Sequence[str | Path],
    folder: str | Path,
    *,
    tokenizer: str | Path,
    ct2_config: str | Path | None = None,
) -> dict[str, Any]:
    """Write a Hugging Face Whisper folder from a CTranslate2 Whisper model.

    Args:
        parts: the ``model.bin`` file, or its parts in order.
        folder: where to write ``config.json``, ``generation_config.json``,
            ``preprocessor_config.json``, ``model.safetensors`` (float32) and
            ``tokenizer.json``; written to a sibling first and renamed, so a failed
            conversion leaves nothing half-written.
        tokenizer: the model's ``tokenizer.json`` (must hold Whisper's special tokens).
        ct2_config: CTranslate2's ``config.json`` beside the model (suppressed tokens).

    Returns:
        The written ``config.json`` as a dict.

    Raises:
        PretrainedError: an unreadable, truncated or non-Whisper model, or a tokenizer
            without Whisper's special tokens (one line naming the file).
    """
    folder, tokenizer = Path(folder), Path(tokenizer)
    specials = whisper_specials(tokenizer)
    extra: dict[str, Any] = {}
    if ct2_config is not None:
        try:
            extra = json.loads(Path(ct2_config).read_text(encoding="utf-8"))
        except (OSError, ValueError) as error:
            raise PretrainedError(
                f"{ct2_config}: not a JSON file ({type(error).__name__})"
            ) from None
    model = read_ct2(parts)
    source = str(Path(parts[0]) if len(parts) == 1 else " + ".join(str(p) for p in parts))
    state = whisper_state_dict(model, source=source)
    config = whisper_hf_config(model, state, specials, extra)
    staging = folder.with_name(folder.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    save_file(state, str(staging / "model.safetensors"), metadata={"format": "pt"})
    for name, content in (
        ("config.json", config),
        ("generation_config.json", _generation_config(config, specials)),
        ("preprocessor_config.json", {**_PREPROCESSOR, "feature_size": config["num_mel_bins"]}),
    ):
        (staging / name).write_text(json.dumps(content, indent=2) + "\n", encoding="utf-8")
    shutil.copyfile(tokenizer, staging / "tokenizer.json")
    shutil.rmtree(folder, ignore_errors=True)
    staging.rename(folder)
    return config
