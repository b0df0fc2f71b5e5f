"""The Transformer decoder block (Vaswani et al. 2017, §3.1; lecture 000, §Transformer).

Three sub-layers, each with a residual connection and layer normalisation (post-LN as in
the paper, or pre-LN; see :mod:`selfattn.blocks.encoder_block`):

1. masked self-attention — position t sees only the decoder's positions ≤ t;
2. cross-attention — queries from the decoder, keys and values from the encoder's output
   (the "memory"), so every target position can look at the whole source;
3. the position-wise feed-forward network.

The cross-attention may keep an alignment across decoder steps (location-aware or forward
attention, :mod:`selfattn.attention.alignment`); its previous step then lives in the
cross-attention's cache.
"""

from __future__ import annotations

from typing import TypedDict

from torch import Tensor, nn

from selfattn.attention.alignment import Alignment, AlignmentConfig, aligned_attention
from selfattn.attention.cache import KVCache
from selfattn.attention.multihead import MultiHeadAttention
from selfattn.blocks.config import BlockConfig
from selfattn.blocks.encoder_block import (
    ResidualBlock,
    block_attention,
    config_from_torch,
    copy_norms,
    feed_forward,
    layer_norm,
    self_attention,
)
from selfattn.blocks.feedforward import FeedForward
from selfattn.positional.base import RelativePositional


class DecoderMaskArgs(TypedDict, total=False):
    """Which positions a decoder's queries may see: the keyword arguments that a decoder
    stack hands on to every :class:`DecoderBlock` as they are.

    Attributes:
        self_key_padding_mask: ``(B, T)`` boolean, True at decoder padding.
        memory_key_padding_mask: ``(B, S)`` boolean, True at encoder padding.
        self_mask: extra mask on self-attention, boolean (True = may attend) or
            additive, broadcastable to ``(B, H, T, T)``.
        memory_mask: the same for cross-attention, broadcastable to ``(B, H, T, S)``.
        causal: mask the future in self-attention (default True, the decoder's).
    """

    self_key_padding_mask: Tensor | None
    memory_key_padding_mask: Tensor | None
    self_mask: Tensor | None
    memory_mask: Tensor | None
    causal: bool


class DecoderBlock(ResidualBlock):
    """Masked self-attention, cross-attention to the memory, then a feed-forward network.

    Both attentions take the config's score, normaliser, heads and weight dropout;
    ``include_self`` applies to the self-attention only.

    Args:
        config: every option of the block; ``config.attention`` must be ``"dense"``
            (incremental decoding reads and extends a KV cache, which only dense keeps).
        memory_dim: Em, feature size of the encoder memory (default E).
        positional: a relative positional encoding for the self-attention, or ``None``.
            Cross-attention gets none: decoder and encoder positions are not on one axis.
        alignment: the cross-attention's alignment (default ``content``: none kept).

    Raises:
        ValueError: ``config.attention`` is not ``"dense"``, or a recurrent alignment with
            a normaliser other than softmax.
    """

    def __init__(
        self,
        config: BlockConfig,
        *,
        memory_dim: int | None = None,
        positional: RelativePositional | None = None,
        alignment: AlignmentConfig | None = None,
    ) -> None:
        super().__init__(config)
        if config.attention != "dense":
            raise ValueError(
                f"attention={config.attention!r}: a decoder block needs attention='dense' "
                "(incremental decoding keeps a KV cache, which only the dense kernel has)"
            )
        if memory_dim is not None and memory_dim < 1:
            raise ValueError(f"memory_dim must be positive, got {memory_dim}")
        self.self_attn = self_attention(config, positional=positional)
        self.cross_attn = block_attention(config, kdim=memory_dim or config.embed_dim)
        alignment = alignment or AlignmentConfig()
        if alignment.kind != "content" and config.normalizer != "softmax":
            raise ValueError(
                f"a {alignment.kind} alignment normalises with a softmax, got normalizer "
                f"{config.normalizer!r}"
            )
        self.alignment = (
            Alignment(alignment, self.cross_attn.head_dim) if alignment.kind != "content" else None
        )
        self.feedforward = feed_forward(config)
        self.norm1 = layer_norm(config)
        self.norm2 = layer_norm(config)
        self.norm3 = layer_norm(config)
        self.dropout1 = nn.Dropout(config.dropout)
        self.dropout2 = nn.Dropout(config.dropout)
        self.dropout3 = nn.Dropout(config.dropout)

    def forward(
        self,
        x: Tensor,
        memory: Tensor,
        *,
        self_key_padding_mask: Tensor | None = None,
        memory_key_padding_mask: Tensor | None = None,
        self_mask: Tensor | None = None,
        memory_mask: Tensor | None = None,
        causal: bool = True,
        need_weights: bool = False,
        cache: tuple[KVCache, KVCache] | None = None,
    ) -> tuple[Tensor, tuple[Tensor, Tensor] | None]:
        """Args:
            x: ``(B, T, E)`` decoder input.
            memory: ``(B, S, Em)`` encoder output.
            self_key_padding_mask: see :class:`DecoderMaskArgs`.
            memory_key_padding_mask: see :class:`DecoderMaskArgs`.
            self_mask: see :class:`DecoderMaskArgs`.
            memory_mask: see :class:`DecoderMaskArgs`.
            causal: see :class:`DecoderMaskArgs`.
            need_weights: also return both attentions' weights.
            cache: ``(self_cache, cross_cache)`` for incremental decoding: ``x`` holds only
                the new positions, earlier ones are read from ``self_cache`` (and a
                ``self_key_padding_mask`` / ``self_mask`` then covers all of them); the
                memory's keys and values are projected once into ``cross_cache``.

        Returns:
            ``(x (B, T, E), (self_weights (B, H, T, T), cross_weights (B, H, T, S)))``, the
            pair being ``None`` unless ``need_weights``.
        """
        attended, self_weights = self.self_attn(
            self.sublayer_input(x, self.norm1),
            key_padding_mask=self_key_padding_mask,
            mask=self_mask,
            causal=causal,
            need_weights=need_weights,
            average_weights=False,
            cache=None if cache is None else cache[0],
        )
        x = self.add_and_norm(x, self._dropout(self.dropout1, attended), self.norm1)
        attended, cross_weights = self._cross_attention(
            self.sublayer_input(x, self.norm2),
            memory,
            key_padding_mask=memory_key_padding_mask,
            mask=memory_mask,
            need_weights=need_weights,
            cache=None if cache is None else cache[1],
        )
        x = self.add_and_norm(x, self._dropout(self.dropout2, attended), self.norm2)
        linears = None if cache is None else cache[0].linears  # the decode's packed weights
        transformed = self.feedforward(self.sublayer_input(x, self.norm3), linears)
        x = self.add_and_norm(x, self._dropout(self.dropout3, transformed), self.norm3)
        if self_weights is None or cross_weights is None:
            return x, None
        return x, (self_weights, cross_weights)

    def _cross_attention(
        self,
        x: Tensor,
        memory: Tensor,
        *,
        key_padding_mask: Tensor | None,
        mask: Tensor | None,
        need_weights: bool,
        cache: KVCache | None,
    ) -> tuple[Tensor, Tensor | None]:
        """The cross-attention, through the alignment's recurrence when there is one."""
        if self.alignment is not None:
            return aligned_attention(
                self.cross_attn,
                self.alignment,
                x,
                memory,
                key_padding_mask=key_padding_mask,
                mask=mask,
                need_weights=need_weights,
                cache=cache,
            )
        return self.cross_attn(
            x,
            memory,
            key_padding_mask=key_padding_mask,
            mask=mask,
            need_weights=need_weights,
            average_weights=False,
            cache=cache,
        )

    def _dropout(self, dropout: nn.Dropout, x: Tensor) -> Tensor:
        """``dropout(x)`` in training; in evaluation the identity, without the module call
        (a decoding step passes here three times per block, for nothing)."""
        return dropout(x) if self.training else x

    @classmethod
    def from_torch(cls, layer: nn.TransformerDecoderLayer) -> DecoderBlock:
        """An equivalent block with the weights of a ``torch.nn.TransformerDecoderLayer``.

        Copies both attentions (``self_attn``, ``multihead_attn``), ``linear1``/``linear2``,
        ``norm1``–``norm3``, the activation (relu or exact gelu; anything else is
        refused), pre/post-LN, ε and bias. The result is batch-first, in the same
        train/eval mode as ``layer``.
        """
        self_attn = MultiHeadAttention.from_torch(layer.self_attn)
        cross_attn = MultiHeadAttention.from_torch(layer.multihead_attn)
        feedforward = FeedForward.from_torch(layer)
        new = cls(
            config_from_torch(layer, self_attn, feedforward),
            memory_dim=cross_attn.k_proj.in_features,
        )
        new.self_attn, new.cross_attn, new.feedforward = self_attn, cross_attn, feedforward
        copy_norms(new, layer, ("norm1", "norm2", "norm3"))
        return new.train(layer.training)
