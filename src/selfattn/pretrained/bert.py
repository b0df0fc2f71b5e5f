"""BERT-family weights from a local Hugging Face folder into selfattn's own modules
(Devlin et al. 2019, "BERT: Pre-training of Deep Bidirectional Transformers"; lecture 000,
§Transformer and §Positional Encoding).

BERT is the lecture's encoder with three choices fixed: post-LN blocks (the paper's
"Add & Norm"), the exact (erf) GELU, and *learned* absolute positions that are summed with
the word and segment (token-type) embeddings and then layer-normalised — the norm comes
after the positions, so selfattn's ``learned`` positional (added after any embedding
norm) cannot stand in for it, and :class:`BertEmbeddings` is its own module.

The folder is read with ``json`` and ``safetensors`` alone (``config.json``,
``model.safetensors``, as ``save_pretrained`` writes them); ``transformers`` is not needed.

>>> bert = BertEncoder.from_folder("all-MiniLM-L6-v2/")
>>> output = bert(input_ids, attention_mask)  # attention_mask: 1 = real token, 0 = padding
>>> output.hidden_states  # embeddings, then each layer: num_layers + 1 tensors (B, L, E)
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file
from torch import Tensor, nn

from selfattn.blocks.encoder_block import EncoderBlock
from selfattn.blocks.feedforward import ActivationName
from selfattn.models.config import StackConfig
from selfattn.models.encoder import Encoder, EncoderOutput
from selfattn.pretrained.weights import PretrainedError, pretrained_folder

__all__ = [
    "BERT_MODEL_TYPES",
    "BertConfig",
    "BertEmbeddings",
    "BertEncoder",
    "CheckpointError",
    "load_bert",
    "parameter_map",
]

CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.safetensors"

#: ``model_type`` values whose checkpoints have BERT's layout and arithmetic. DistilBERT is
#: BERT without token types (other key and tensor names: :data:`DISTILBERT_KEYS`,
#: :func:`parameter_map`). RoBERTa is left out on purpose: its positions start at
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

# BERT's activation names with an exact counterpart in selfattn's feed-forward network
# ("gelu" is the erf form in Hugging Face; "gelu_new" / "gelu_pytorch_tanh" are not).
_ACTIVATIONS: dict[str, ActivationName] = {"gelu": "gelu", "relu": "relu"}


class CheckpointError(PretrainedError):
    """A checkpoint folder whose config or weights cannot be loaded: one line naming the
    file and the problem (a ``ValueError``, so the CLI prints it and exits with status 2)."""


@dataclass(frozen=True)
class BertConfig:
    """The fields of a Hugging Face BERT ``config.json`` that shape the model.

    Attributes:
        vocab_size: rows of the word-embedding table.
        hidden_size: E.
        num_hidden_layers: number of encoder blocks.
        num_attention_heads: H.
        intermediate_size: hidden size of the feed-forward network.
        hidden_act: ``"gelu"`` (exact, erf) or ``"relu"``.
        hidden_dropout_prob: dropout on embeddings and each sub-layer's output.
        attention_probs_dropout_prob: dropout on the attention weights.
        max_position_embeddings: rows of the position table (the longest input).
        type_vocab_size: rows of the token-type (segment) table; 0: none (DistilBERT).
        layer_norm_eps: ε of every layer norm (BERT: 1e-12).
        model_type: ``"bert"`` or ``"distilbert"`` (which tensor names the weights have).
    """

    vocab_size: int
    hidden_size: int
    num_hidden_layers: int
    num_attention_heads: int
    intermediate_size: int
    hidden_act: str = "gelu"
    hidden_dropout_prob: float = 0.1
    attention_probs_dropout_prob: float = 0.1
    max_position_embeddings: int = 512
    type_vocab_size: int = 2
    layer_norm_eps: float = 1e-12
    model_type: str = "bert"

    @classmethod
    def from_file(cls, path: str | Path) -> BertConfig:
        """Read a ``config.json``; every problem is a one-line :class:`CheckpointError`."""
        path = Path(path)
        if not path.is_file():
            raise CheckpointError(f"{path}: not a BERT folder: {CONFIG_FILE} is missing")
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as error:
            raise CheckpointError(f"{path}: not valid JSON ({one_line(error)})") from None
        if not isinstance(raw, dict):
            raise CheckpointError(f"{path}: expected a JSON object")
        return cls.from_dict(raw, source=path)

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any], *, source: str | Path = CONFIG_FILE) -> BertConfig:
        """The config in ``raw`` (a parsed ``config.json``); ``source`` names it in errors."""
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
                f"{source}: position_embedding_type {position_type!r} is not supported; "
                "only 'absolute'"
            )
        if raw.get("is_decoder") or raw.get("add_cross_attention"):
            raise CheckpointError(f"{source}: a BERT decoder (is_decoder / add_cross_attention)")
        fields = {name: raw[name] for name in cls.__dataclass_fields__ if name in raw}
        missing = [name for name in _REQUIRED if name not in fields]
        if missing:
            raise CheckpointError(f"{source}: missing {', '.join(missing)}")
        for name in _REQUIRED:
            if not isinstance(fields[name], int) or fields[name] < 1:
                raise CheckpointError(
                    f"{source}: {name} must be a positive integer, got {fields[name]!r}"
                )
        config = cls(**fields)
        if config.hidden_act not in _ACTIVATIONS:
            raise CheckpointError(
                f"{source}: hidden_act {config.hidden_act!r} has no exact counterpart here; "
                f"supported: {sorted(_ACTIVATIONS)}"
            )
        if config.hidden_size % config.num_attention_heads:
            raise CheckpointError(
                f"{source}: hidden_size ({config.hidden_size}) is not divisible by "
                f"num_attention_heads ({config.num_attention_heads})"
            )
        return config

    def stack_config(self) -> StackConfig:
        """The selfattn stack: post-LN, exact GELU, BERT's ε, no positional encoding in the
        stack (:class:`BertEmbeddings` adds it) and no final norm (post-LN blocks end in
        one)."""
        return StackConfig(
            self.hidden_size,
            self.num_attention_heads,
            self.intermediate_size,
            num_layers=self.num_hidden_layers,
            dropout=self.hidden_dropout_prob,
            attention_dropout=self.attention_probs_dropout_prob,
            activation=_ACTIVATIONS[self.hidden_act],
            norm_first=False,
            layer_norm_eps=self.layer_norm_eps,
            positional=None,
            max_len=self.max_position_embeddings,
            final_norm=False,
            embed_dropout=self.hidden_dropout_prob,
        )


_REQUIRED = (
    "vocab_size",
    "hidden_size",
    "num_hidden_layers",
    "num_attention_heads",
    "intermediate_size",
)


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


class BertEmbeddings(nn.Module):
    """``LN(word[input_ids] + position[0 … L-1] + token_type[token_type_ids])`` (no
    token-type term for a checkpoint without them, DistilBERT's).

    The dropout BERT applies next is the encoder stack's ``embed_dropout``.

    Args:
        config: the checkpoint's config.
    """

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.max_len = config.max_position_embeddings
        self.word_embeddings = nn.Embedding(config.vocab_size, config.hidden_size)
        self.position_embeddings = nn.Embedding(config.max_position_embeddings, config.hidden_size)
        self.token_type_embeddings = (
            nn.Embedding(config.type_vocab_size, config.hidden_size)
            if config.type_vocab_size
            else None
        )
        self.norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)

    def forward(self, input_ids: Tensor, token_type_ids: Tensor | None = None) -> Tensor:
        """Args:
            input_ids: ``(B, L)`` token ids.
            token_type_ids: ``(B, L)`` segment ids (``None``: all 0, one segment).

        Returns:
            ``(B, L, E)``.
        """
        length = input_ids.shape[1]
        if length > self.max_len:
            raise ValueError(
                f"input of {length} tokens is longer than the checkpoint's "
                f"max_position_embeddings ({self.max_len})"
            )
        if token_type_ids is None:
            token_type_ids = torch.zeros_like(input_ids)
        # An exported graph cannot branch on values: its user feeds ids from the tokenizer.
        checks: tuple[tuple[str, Tensor, nn.Embedding], ...] = ()
        if not torch.compiler.is_exporting():
            checks = (("token id", input_ids, self.word_embeddings),)
            if self.token_type_embeddings is not None:
                checks += (("token type", token_type_ids, self.token_type_embeddings),)
            elif token_type_ids.numel() and bool(token_type_ids.any()):
                raise ValueError("token type ids other than 0: this checkpoint has no segments")
        for name, ids, table in checks:
            if ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= table.num_embeddings):
                raise ValueError(
                    f"{name} {int(ids.max()) if int(ids.min()) >= 0 else int(ids.min())} is "
                    f"outside the checkpoint's 0…{table.num_embeddings - 1}"
                )
        positions = torch.arange(length, device=input_ids.device)
        x = self.word_embeddings(input_ids) + self.position_embeddings(positions)
        if self.token_type_embeddings is not None:
            x = x + self.token_type_embeddings(token_type_ids)
        return self.norm(x)


class BertEncoder(nn.Module):
    """BERT's embeddings and encoder stack as selfattn modules: :class:`BertEmbeddings` and
    a post-LN :class:`~selfattn.models.Encoder`.

    Args:
        config: the checkpoint's config; the weights are random until loaded (see
            :meth:`from_folder`).
    """

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.config = config
        self.embeddings = BertEmbeddings(config)
        self.encoder = Encoder(config.stack_config())
        for block in self.encoder.layers:
            assert isinstance(block, EncoderBlock)
            # BERT drops the feed-forward output only, not its hidden layer as selfattn's
            # FeedForward does: keep fine-tuning's regularisation what the weights saw.
            block.feedforward.dropout = nn.Dropout(0.0)

    @property
    def embed_dim(self) -> int:
        """E, the size of every hidden state."""
        return self.config.hidden_size

    def forward(
        self,
        input_ids: Tensor,
        attention_mask: Tensor | None = None,
        token_type_ids: Tensor | None = None,
        *,
        need_weights: bool = False,
    ) -> EncoderOutput:
        """Args:
            input_ids: ``(B, L)`` token ids.
            attention_mask: ``(B, L)``, Hugging Face's convention: 1 (or True) at real
                tokens, 0 at padding; ``None``: no padding.
            token_type_ids: ``(B, L)`` segment ids; ``None``: all 0.
            need_weights: also return every block's attention weights ``(B, H, L, L)``.

        Returns:
            An :class:`~selfattn.models.encoder.EncoderOutput`: ``hidden_states`` holds
            ``num_layers + 1`` tensors ``(B, L, E)`` — the embeddings' output, then each
            block's (Hugging Face's ``output_hidden_states=True``). Padded positions hold
            values that mean nothing.
        """
        if input_ids.dim() != 2:
            raise ValueError(f"input_ids must have shape (B, L), got {tuple(input_ids.shape)}")
        key_padding_mask = None
        if attention_mask is not None:
            if attention_mask.shape != input_ids.shape:
                raise ValueError(
                    f"attention_mask has shape {tuple(attention_mask.shape)} but input_ids "
                    f"has {tuple(input_ids.shape)}"
                )
            key_padding_mask = attention_mask == 0  # selfattn: True at padding
        x = self.embeddings(input_ids, token_type_ids)
        return self.encoder(x, key_padding_mask=key_padding_mask, need_weights=need_weights)

    @classmethod
    def from_folder(cls, folder: str | Path) -> BertEncoder:
        """The model in a Hugging Face BERT folder (``config.json``, ``model.safetensors``),
        in eval mode, float32.

        Raises:
            CheckpointError: a missing file, a config that is not BERT's, weights that do
                not match the config, or an unreadable safetensors file; one line naming
                the file.
        """
        folder = Path(folder)
        if not folder.is_dir():
            raise CheckpointError(f"{folder}: not a folder")
        config = BertConfig.from_file(folder / CONFIG_FILE)
        model = cls(config)
        weights = read_weights(folder / WEIGHTS_FILE)
        model.load_state_dict(match_weights(weights, model, folder))
        return model.eval()


def load_bert(name_or_folder: str | Path) -> BertEncoder:
    """The BERT checkpoint of a registered name (``"minilm-l6"``, fetched on first use) or
    in a local folder, in eval mode: :meth:`BertEncoder.from_folder` on
    :func:`~selfattn.pretrained.weights.pretrained_folder`.

    Raises:
        PretrainedError: the name cannot be fetched, or the folder is not a checkpoint
            (:class:`CheckpointError` for its config or weights).
    """
    return BertEncoder.from_folder(pretrained_folder(name_or_folder))


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
    layer = "transformer.layer" if distil else "encoder.layer"
    for index in range(num_layers):
        for ours, theirs in modules.items():
            for kind in ("weight", "bias"):
                names[f"encoder.layers.{index}.{ours}.{kind}"] = f"{layer}.{index}.{theirs}.{kind}"
    return names


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


def read_weights(path: Path) -> dict[str, Tensor]:
    """Every tensor of a safetensors file, under Hugging Face ``BertModel``'s (or
    ``DistilBertModel``'s) names: a task model's ``bert.`` or ``distilbert.`` prefix is
    dropped, and TensorFlow-era ``LayerNorm.gamma`` /
    ``beta`` become ``weight`` / ``bias``."""
    if not path.is_file():
        raise CheckpointError(f"{path}: not a BERT folder: {WEIGHTS_FILE} is missing")
    try:
        raw = load_file(path)
    except (SafetensorError, OSError) as error:
        raise CheckpointError(
            f"{path}: not a readable safetensors file, truncated or corrupt ({one_line(error)})"
        ) from None
    weights = {}
    for name, tensor in raw.items():
        name = name.removeprefix("bert.").removeprefix("distilbert.")
        name = name.replace("LayerNorm.gamma", "LayerNorm.weight")
        weights[name.replace("LayerNorm.beta", "LayerNorm.bias")] = tensor
    return weights


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
    layers = "transformer.layer" if config.model_type == "distilbert" else "encoder.layer"
    extra_layer = f"{layers}.{config.num_hidden_layers}."
    if any(name.startswith(extra_layer) for name in weights):
        raise CheckpointError(
            f"{weights_file}: holds more than the {config.num_hidden_layers} layers "
            f"{config_file} says (num_hidden_layers)"
        )
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


def one_line(error: BaseException) -> str:
    """An exception's message on one line."""
    return " ".join(str(error).split())
