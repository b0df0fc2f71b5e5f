"""A stack of Conformer blocks (Gulati et al. 2020) with :class:`Encoder`'s interface: the
lecture's hint for speech (self-attention for global context, convolution for local)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from torch import Tensor, nn

from selfattn.blocks.conformer import ConformerBlock, ConvNormName
from selfattn.models.encoder import (
    EncoderOutput,
    block_kernel,
    build_positionals,
    check_stack,
    run_blocks,
)


class Conformer(nn.Module):
    """A stack of :class:`ConformerBlock`, called like :class:`~selfattn.models.Encoder`.

    The input is already a sequence of E-dimensional vectors (e.g. log-mel frames
    projected to E; the paper first subsamples them 4× with strided convolutions).
    Every block ends in a LayerNorm, so the stack needs no final norm.

    Args:
        embed_dim: E.
        num_heads: H.
        num_layers: number of blocks.
        ffn_dim: hidden size of each feed-forward module.
        conv_kernel_size: K of every depthwise convolution.
        conv_norm: ``"batch"`` or ``"layer"`` after each depthwise convolution.
        dropout: inside the blocks, and on the input after positional encoding.
        positional: name of a positional encoding in :data:`selfattn.positional.POSITIONAL`
            (absolute ones are added to the input, relative ones act in every block's
            attention), or ``None``: the convolutions alone then carry order.
        max_len: longest sequence the positional encoding must cover.
        positional_options: extra keyword arguments for the positional encoding.
        layer_norm_eps: ε of every layer norm.
        attention: the attention variant of every block, a key of
            :data:`selfattn.kernels.KERNELS` (``"window"`` for truncated attention).
        attention_options: the variant's options, e.g. ``{"window": 64}``.
        attention_dropout: dropout on the attention weights alone (default ``dropout``).
    """

    def __init__(
        self,
        embed_dim: int,
        num_heads: int,
        num_layers: int,
        ffn_dim: int,
        *,
        conv_kernel_size: int = 31,
        conv_norm: ConvNormName = "batch",
        dropout: float = 0.0,
        positional: str | None = None,
        max_len: int = 512,
        positional_options: Mapping[str, Any] | None = None,
        layer_norm_eps: float = 1e-5,
        attention: str = "dense",
        attention_options: Mapping[str, Any] | None = None,
        attention_dropout: float | None = None,
    ) -> None:
        super().__init__()
        check_stack(
            embed_dim=embed_dim,
            num_heads=num_heads,
            num_layers=num_layers,
            ffn_dim=ffn_dim,
            dropout=dropout,
            activation="relu",  # not used: the feed-forward modules are always Swish
            positional=positional,
        )
        self.num_layers = num_layers
        self.absolute, relatives = build_positionals(
            positional,
            embed_dim=embed_dim,
            num_heads=num_heads,
            max_len=max_len,
            num_relative=num_layers,
            options=positional_options,
        )
        self.embed_dropout = nn.Dropout(dropout)
        self.layers = nn.ModuleList(
            ConformerBlock(
                embed_dim,
                num_heads,
                ffn_dim,
                conv_kernel_size=conv_kernel_size,
                dropout=dropout,
                conv_norm=conv_norm,
                layer_norm_eps=layer_norm_eps,
                kernel=block_kernel(
                    attention, attention_options, embed_dim // num_heads, max_len, index
                ),
                positional=relative,
                attention_dropout=attention_dropout,
            )
            for index, relative in enumerate(relatives)
        )

    def forward(
        self,
        x: Tensor,
        *,
        key_padding_mask: Tensor | None = None,
        mask: Tensor | None = None,
        causal: bool = False,
        window: int | None = None,
        need_weights: bool = False,
    ) -> EncoderOutput:
        """Args:
            x: ``(B, L, E)`` input vectors (already projected to E).
            key_padding_mask: ``(B, L)`` boolean, True at padding.
            mask: attention mask broadcastable to ``(B, H, L, L)``, the same in every block.
            causal: streaming: attention and convolutions see only the past.
            window: truncated dense attention to |i − j| ≤ ``window`` in every block.
            need_weights: also return every block's attention weights.

        Returns:
            An :class:`~selfattn.models.encoder.EncoderOutput`.
        """
        x, hidden_states, attentions = run_blocks(
            x,
            self.layers,
            self.absolute,
            self.embed_dropout,
            key_padding_mask=key_padding_mask,
            mask=mask,
            causal=causal,
            window=window,
            need_weights=need_weights,
        )
        return EncoderOutput(x, hidden_states, attentions if need_weights else None)
