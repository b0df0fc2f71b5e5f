"""BERT as selfattn modules (Devlin et al. 2019, "BERT: Pre-training of Deep Bidirectional
Transformers"; lecture 000, §Transformer and §Positional Encoding): its shape
(:class:`BertConfig`), its embeddings (:class:`BertEmbeddings`) and the encoder
(:class:`BertEncoder`) on the models' own :class:`~selfattn.models.Encoder`.

BERT is the lecture's encoder with three choices fixed: post-LN blocks (the paper's
"Add & Norm"), the exact (erf) GELU, and *learned* absolute positions that are summed with
the word and segment (token-type) embeddings and then layer-normalised — the norm comes
after the positions, so selfattn's ``learned`` positional (added after any embedding
norm) cannot stand in for it, and :class:`BertEmbeddings` is its own module.

Nothing here reads a file: a checkpoint folder's ``config.json`` and weights are read by
:mod:`selfattn.pretrained.bert` (``bert_from_folder``, ``load_bert``), which fills these
modules.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from selfattn.blocks.encoder_block import EncoderBlock
from selfattn.blocks.feedforward import ActivationName
from selfattn.models.config import StackConfig
from selfattn.models.encoder import Encoder, EncoderOutput

__all__ = ["BERT_ACTIVATIONS", "BertConfig", "BertEmbeddings", "BertEncoder"]

#: BERT's activation names with an exact counterpart in selfattn's feed-forward network
#: ("gelu" is the erf form in Hugging Face; "gelu_new" / "gelu_pytorch_tanh" are not).
BERT_ACTIVATIONS: dict[str, ActivationName] = {"gelu": "gelu", "relu": "relu"}


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
            activation=BERT_ACTIVATIONS[self.hidden_act],
            norm_first=False,
            layer_norm_eps=self.layer_norm_eps,
            positional=None,
            max_len=self.max_position_embeddings,
            final_norm=False,
            embed_dropout=self.hidden_dropout_prob,
        )


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
            :func:`selfattn.pretrained.bert.bert_from_folder`).
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
