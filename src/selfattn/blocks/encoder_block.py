"""The Transformer encoder block (Vaswani et al. 2017, §3.1; lecture 000, §Transformer).

Two sub-layers, each wrapped in a residual connection and layer normalisation:

* post-LN, as in the paper: ``x = LN(x + MHA(x))``, then ``x = LN(x + FFN(x))``;
* pre-LN (Xiong et al. 2020, "On Layer Normalization in the Transformer Architecture"):
  ``x = x + MHA(LN(x))``, then ``x = x + FFN(LN(x))``, which trains without warm-up
  but leaves the stack's output un-normalised (so encoders add a final LayerNorm).
"""

from __future__ import annotations

import copy
from typing import Unpack

from torch import Tensor, nn

from selfattn.attention.masks import MaskArgs
from selfattn.attention.multihead import MultiHeadAttention
from selfattn.blocks.config import BlockConfig
from selfattn.blocks.feedforward import FeedForward
from selfattn.positional.base import RelativePositional


class ResidualBlock(nn.Module):
    """The paper's "Add & Norm" around each sub-layer, post-LN or pre-LN (``config.norm_first``);
    the base of :class:`EncoderBlock`, :class:`~selfattn.blocks.DecoderBlock` and the
    graph block.

    Args:
        config: the block's options.
    """

    def __init__(self, config: BlockConfig) -> None:
        super().__init__()
        self.config = config

    def sublayer_input(self, x: Tensor, norm: nn.Module) -> Tensor:
        """What a sub-layer reads: ``LN(x)`` in a pre-LN block, ``x`` itself in a post-LN one."""
        return norm(x) if self.config.norm_first else x

    def add_and_norm(self, x: Tensor, update: Tensor, norm: nn.Module) -> Tensor:
        """The paper's "Add & Norm": ``LN(x + update)`` post-LN, ``x + update`` pre-LN."""
        return x + update if self.config.norm_first else norm(x + update)


def self_attention(
    config: BlockConfig,
    *,
    positional: RelativePositional | None = None,
    kernel: nn.Module | None = None,
) -> MultiHeadAttention:
    """The self-attention ``config`` describes, with a relative encoding and a kernel.

    Raises:
        ValueError: ``config.attention`` names a kernel other than dense but none is given
            (a stack builds one per block; a lone block needs ``kernel=build_kernel(…)``).
    """
    if kernel is None and config.attention != "dense":
        raise ValueError(
            f"attention={config.attention!r} but no kernel was given: stacks build one per "
            f"block; a lone block takes kernel=build_kernel({config.attention!r}, ...)"
        )
    return block_attention(
        config, include_self=config.include_self, positional=positional, kernel=kernel
    )


def block_attention(
    config: BlockConfig,
    *,
    kdim: int | None = None,
    include_self: bool = True,
    positional: RelativePositional | None = None,
    kernel: nn.Module | None = None,
) -> MultiHeadAttention:
    """An attention of a block, self- or cross- (keys of width ``kdim``): its width, heads,
    key/value heads, bias, weight dropout, score and normaliser are ``config``'s."""
    return MultiHeadAttention(
        config.embed_dim,
        config.num_heads,
        kdim=kdim,
        num_kv_heads=config.num_kv_heads,
        bias=config.bias,
        dropout=config.weight_dropout,
        score=config.score,
        normalizer=config.normalizer,
        include_self=include_self,
        positional=positional,
        kernel=kernel,
    )


class EncoderBlock(ResidualBlock):
    """Self-attention followed by a position-wise feed-forward network.

    Args:
        config: every option of the block (sizes, dropout, activation, pre/post-LN, the
            attention's score, normaliser, heads, …).
        positional: a relative positional encoding used inside attention, or ``None``.
        kernel: the attention kernel built from ``config.attention`` (stacks build one per
            block), or ``None`` for the dense path.
    """

    def __init__(
        self,
        config: BlockConfig,
        *,
        positional: RelativePositional | None = None,
        kernel: nn.Module | None = None,
    ) -> None:
        super().__init__(config)
        self.self_attn = self_attention(config, positional=positional, kernel=kernel)
        self.feedforward = feed_forward(config)
        self.norm1 = layer_norm(config)
        self.norm2 = layer_norm(config)
        self.dropout1 = nn.Dropout(config.dropout)
        self.dropout2 = nn.Dropout(config.dropout)

    def forward(
        self,
        x: Tensor,
        *,
        need_weights: bool = False,
        **masks: Unpack[MaskArgs],
    ) -> tuple[Tensor, Tensor | None]:
        """Args:
            x: ``(B, L, E)``.
            need_weights: also return the attention weights.
            **masks: which keys each position may see, handed to the self-attention as
                they are (:class:`~selfattn.attention.MaskArgs`: ``key_padding_mask``,
                ``mask``, ``causal``, ``window``).

        Returns:
            ``(x (B, L, E), weights (B, H, L, L) or None)``.
        """
        attended, weights = self.self_attn(
            self.sublayer_input(x, self.norm1),
            need_weights=need_weights,
            average_weights=False,
            **masks,
        )
        x = self.add_and_norm(x, self.dropout1(attended), self.norm1)
        transformed = self.feedforward(self.sublayer_input(x, self.norm2))
        x = self.add_and_norm(x, self.dropout2(transformed), self.norm2)
        return x, weights

    @classmethod
    def from_torch(cls, layer: nn.TransformerEncoderLayer) -> EncoderBlock:
        """An equivalent block with the weights of a ``torch.nn.TransformerEncoderLayer``.

        Copies the attention, ``linear1``/``linear2``, ``norm1``/``norm2``, the activation
        (relu or exact gelu; anything else is refused), pre/post-LN, ε and bias. The
        result is batch-first whatever ``layer`` says, and in the same train/eval mode.
        """
        attention = MultiHeadAttention.from_torch(layer.self_attn)
        feedforward = FeedForward.from_torch(layer)
        new = cls(config_from_torch(layer, attention, feedforward))
        new.self_attn, new.feedforward = attention, feedforward
        copy_norms(new, layer, ("norm1", "norm2"))
        return new.train(layer.training)


def feed_forward(config: BlockConfig) -> FeedForward:
    """The block's position-wise feed-forward network: E → ``ffn_dim`` → E."""
    return FeedForward(
        config.embed_dim,
        config.ffn_dim,
        config.activation,
        dropout=config.hidden_dropout,
        bias=config.bias,
    )


def layer_norm(config: BlockConfig) -> nn.LayerNorm:
    """A LayerNorm over E with the config's ε and bias."""
    return nn.LayerNorm(config.embed_dim, eps=config.layer_norm_eps, bias=config.bias)


def config_from_torch(
    layer: nn.TransformerEncoderLayer | nn.TransformerDecoderLayer,
    attention: MultiHeadAttention,
    feedforward: FeedForward,
) -> BlockConfig:
    """The :class:`BlockConfig` of a torch Transformer layer."""
    return BlockConfig(
        attention.embed_dim,
        attention.num_heads,
        feedforward.in_proj.out_features,
        dropout=layer.dropout1.p,
        activation=feedforward.activation_name,
        norm_first=layer.norm_first,
        layer_norm_eps=layer.norm1.eps,
        bias=layer.linear1.bias is not None,
    )


def copy_norms(new: nn.Module, layer: nn.Module, names: tuple[str, ...]) -> None:
    """Replace ``new``'s layer norms called ``names`` with copies of ``layer``'s."""
    for name in names:
        setattr(new, name, copy.deepcopy(getattr(layer, name)))
