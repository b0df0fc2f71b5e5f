"""The Transformer decoder block (Vaswani et al. 2017, §3.1; lecture 000, §Transformer).

Three sub-layers, each with a residual connection and layer normalisation (post-LN as in
the paper, or pre-LN; see :mod:`selfattn.blocks.encoder_block`):

1. masked self-attention — position t sees only the decoder's positions ≤ t;
2. cross-attention — queries from the decoder, keys and values from the encoder's output
   (the "memory"), so every target position can look at the whole source;
3. the position-wise feed-forward network.
"""

from __future__ import annotations

from torch import Tensor, nn

from selfattn.attention.cache import KVCache
from selfattn.attention.multihead import MultiHeadAttention
from selfattn.attention.normalizers import NormalizerFn
from selfattn.attention.scores import ScoreFn
from selfattn.blocks.encoder_block import add_and_norm, copy_norms, sublayer_input
from selfattn.blocks.feedforward import ActivationName, FeedForward
from selfattn.positional.base import RelativePositional


class DecoderBlock(nn.Module):
    """Masked self-attention, cross-attention to the memory, then a feed-forward network.

    Args:
        embed_dim: E.
        num_heads: H, in both attentions.
        ffn_dim: hidden size of the feed-forward network.
        memory_dim: Em, feature size of the encoder memory (default E).
        dropout: dropout on attention weights, inside the feed-forward network and on each
            sub-layer's output before the residual addition.
        activation: feed-forward activation, see :data:`~selfattn.blocks.ACTIVATIONS`.
        norm_first: pre-LN instead of the paper's post-LN.
        layer_norm_eps: ε of the three layer norms.
        bias: biases in every linear layer and layer norm.
        score: attention score (both attentions).
        normalizer: attention normaliser (both attentions).
        num_kv_heads: key/value heads of both attentions (default H).
        include_self: False forbids a position attending to itself (self-attention only).
        positional: a relative positional encoding for the self-attention, or ``None``.
            Cross-attention gets none: decoder and encoder positions are not on one axis.
        attention_dropout: dropout on the weights of both attentions (default ``dropout``).
            On CPU, PyTorch has no fused attention dropout: any value > 0 leaves the fused
            kernel for a slower path, so ``0`` with ``dropout`` elsewhere is the fast choice.
    """

    def __init__(
        self,
        embed_dim: int,
        num_heads: int,
        ffn_dim: int,
        *,
        memory_dim: int | None = None,
        dropout: float = 0.0,
        activation: ActivationName = "relu",
        norm_first: bool = False,
        layer_norm_eps: float = 1e-5,
        bias: bool = True,
        score: str | ScoreFn = "scaled_dot",
        normalizer: str | NormalizerFn = "softmax",
        num_kv_heads: int | None = None,
        include_self: bool = True,
        positional: RelativePositional | None = None,
        attention_dropout: float | None = None,
    ) -> None:
        super().__init__()
        self.norm_first = norm_first
        weight_dropout = dropout if attention_dropout is None else attention_dropout
        self.self_attn = MultiHeadAttention(
            embed_dim,
            num_heads,
            num_kv_heads=num_kv_heads,
            bias=bias,
            dropout=weight_dropout,
            score=score,
            normalizer=normalizer,
            include_self=include_self,
            positional=positional,
        )
        self.cross_attn = MultiHeadAttention(
            embed_dim,
            num_heads,
            kdim=memory_dim or embed_dim,
            num_kv_heads=num_kv_heads,
            bias=bias,
            dropout=weight_dropout,
            score=score,
            normalizer=normalizer,
        )
        self.feedforward = FeedForward(embed_dim, ffn_dim, activation, dropout=dropout, bias=bias)
        self.norm1 = nn.LayerNorm(embed_dim, eps=layer_norm_eps, bias=bias)
        self.norm2 = nn.LayerNorm(embed_dim, eps=layer_norm_eps, bias=bias)
        self.norm3 = nn.LayerNorm(embed_dim, eps=layer_norm_eps, bias=bias)
        self.dropout1 = nn.Dropout(dropout)
        self.dropout2 = nn.Dropout(dropout)
        self.dropout3 = nn.Dropout(dropout)

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
            self_key_padding_mask: ``(B, T)`` boolean, True at decoder padding.
            memory_key_padding_mask: ``(B, S)`` boolean, True at encoder padding.
            self_mask: extra mask on self-attention, boolean (True = may attend) or
                additive, broadcastable to ``(B, H, T, T)``.
            memory_mask: the same for cross-attention, broadcastable to ``(B, H, T, S)``.
            causal: mask the future in self-attention (the decoder's default).
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
            sublayer_input(x, self.norm1, self.norm_first),
            key_padding_mask=self_key_padding_mask,
            mask=self_mask,
            causal=causal,
            need_weights=need_weights,
            average_weights=False,
            cache=None if cache is None else cache[0],
        )
        x = add_and_norm(x, self.dropout1(attended), self.norm1, self.norm_first)
        attended, cross_weights = self.cross_attn(
            sublayer_input(x, self.norm2, self.norm_first),
            memory,
            key_padding_mask=memory_key_padding_mask,
            mask=memory_mask,
            need_weights=need_weights,
            average_weights=False,
            cache=None if cache is None else cache[1],
        )
        x = add_and_norm(x, self.dropout2(attended), self.norm2, self.norm_first)
        transformed = self.feedforward(sublayer_input(x, self.norm3, self.norm_first))
        x = add_and_norm(x, self.dropout3(transformed), self.norm3, self.norm_first)
        if self_weights is None or cross_weights is None:
            return x, None
        return x, (self_weights, cross_weights)

    @classmethod
    def from_torch(cls, layer: nn.TransformerDecoderLayer) -> DecoderBlock:
        """An equivalent block with the weights of a ``torch.nn.TransformerDecoderLayer``.

        Copies both attentions (``self_attn``, ``multihead_attn``), ``linear1``/``linear2``,
        ``norm1``–``norm3``, the activation (relu or exact gelu; anything else is
        refused), ``norm_first``, ε and bias. The result is batch-first, in the same
        train/eval mode as ``layer``.
        """
        self_attn = MultiHeadAttention.from_torch(layer.self_attn)
        cross_attn = MultiHeadAttention.from_torch(layer.multihead_attn)
        feedforward = FeedForward.from_torch(layer)
        new = cls(
            self_attn.embed_dim,
            self_attn.num_heads,
            feedforward.in_proj.out_features,
            memory_dim=cross_attn.k_proj.in_features,
            dropout=layer.dropout1.p,
            activation=feedforward.activation_name,
            norm_first=layer.norm_first,
            layer_norm_eps=layer.norm1.eps,
            bias=layer.linear1.bias is not None,
        )
        new.self_attn, new.cross_attn, new.feedforward = self_attn, cross_attn, feedforward
        copy_norms(new, layer, ("norm1", "norm2", "norm3"))
        return new.train(layer.training)
