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

from collections.abc import Mapping
from pathlib import Path

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file
from torch import Tensor, nn

from selfattn.blocks.encoder_block import EncoderBlock
from selfattn.models.encoder import Encoder, EncoderOutput
from selfattn.pretrained.bert_config import (
    BERT_MODEL_TYPES,
    BERT_MODULES,
    CONFIG_FILE,
    DISTILBERT_KEYS,
    DISTILBERT_MODULES,
    WEIGHTS_FILE,
    BertConfig,
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
    "load_bert",
    "parameter_map",
]


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
