"""The Transformer encoder block (Vaswani et al. 2017, §3.1; lecture 000, §Transformer).

Two sub-layers, each wrapped in a residual connection and layer normalisation:

* post-LN, as in the paper: ``x = LN(x + MHA(x))``, then ``x = LN(x + FFN(x))``;
* pre-LN (Xiong et al. 2020, "On Layer Normalization in the Transformer Architecture"):
  ``x = x + MHA(LN(x))``, then ``x = x + FFN(LN(x))``, which trains without warm-up
  but leaves the stack's output un-normalised (so encoders add a final LayerNorm).
"""

from __future__ import annotations

import copy

from torch import Tensor, nn

from selfattn.attention.multihead import MultiHeadAttention
from selfattn.attention.normalizers import NormalizerFn
from selfattn.attention.scores import ScoreFn
from selfattn.blocks.feedforward import ActivationName, FeedForward
from selfattn.positional.base import RelativePositional


def sublayer_input(x: Tensor, norm: nn.LayerNorm, norm_first: bool) -> Tensor:
    """What a sub-layer reads: ``LN(x)`` in a pre-LN block, ``x`` itself in a post-LN one."""
    return norm(x) if norm_first else x


def add_and_norm(x: Tensor, update: Tensor, norm: nn.LayerNorm, norm_first: bool) -> Tensor:
    """The paper's "Add & Norm": ``LN(x + update)`` post-LN, ``x + update`` pre-LN."""
    return x + update if norm_first else norm(x + update)


class EncoderBlock(nn.Module):
    """Self-attention followed by a position-wise feed-forward network.

    Args:
        embed_dim: E.
        num_heads: H.
        ffn_dim: hidden size of the feed-forward network.
        dropout: dropout on the attention weights, inside the feed-forward network and on
            each sub-layer's output before the residual addition.
        activation: feed-forward activation, see :data:`~selfattn.blocks.ACTIVATIONS`.
        norm_first: pre-LN instead of the paper's post-LN.
        layer_norm_eps: ε of both layer norms.
        bias: biases in every linear layer and layer norm.
        score: attention score, see :class:`~selfattn.attention.MultiHeadAttention`.
        normalizer: attention normaliser.
        num_kv_heads: key/value heads (grouped-query attention; default H).
        include_self: False forbids each position attending to itself.
        positional: a relative positional encoding used inside attention, or ``None``.
        kernel: an attention variant (:mod:`selfattn.kernels`) in place of the dense
            kernel, or ``None``.
        attention_dropout: dropout on the attention weights alone (default ``dropout``).
            On CPU, PyTorch has no fused attention dropout: any value > 0 leaves the fused
            kernel for a slower path, so ``0`` with ``dropout`` elsewhere is the fast choice.
    """

    def __init__(
        self,
        embed_dim: int,
        num_heads: int,
        ffn_dim: int,
        *,
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
        kernel: nn.Module | None = None,
        attention_dropout: float | None = None,
    ) -> None:
        super().__init__()
        self.norm_first = norm_first
        self.self_attn = MultiHeadAttention(
            embed_dim,
            num_heads,
            num_kv_heads=num_kv_heads,
            bias=bias,
            dropout=dropout if attention_dropout is None else attention_dropout,
            score=score,
            normalizer=normalizer,
            include_self=include_self,
            positional=positional,
            kernel=kernel,
        )
        self.feedforward = FeedForward(embed_dim, ffn_dim, activation, dropout=dropout, bias=bias)
        self.norm1 = nn.LayerNorm(embed_dim, eps=layer_norm_eps, bias=bias)
        self.norm2 = nn.LayerNorm(embed_dim, eps=layer_norm_eps, bias=bias)
        self.dropout1 = nn.Dropout(dropout)
        self.dropout2 = nn.Dropout(dropout)

    def forward(
        self,
        x: Tensor,
        *,
        key_padding_mask: Tensor | None = None,
        mask: Tensor | None = None,
        causal: bool = False,
        window: int | None = None,
        need_weights: bool = False,
    ) -> tuple[Tensor, Tensor | None]:
        """Args:
            x: ``(B, L, E)``.
            key_padding_mask: ``(B, L)`` boolean, True at padding.
            mask: boolean (True = may attend) or additive float mask broadcastable to
                ``(B, H, L, L)``; e.g. a graph's :func:`~selfattn.attention.adjacency_mask`.
            causal: each position sees only itself and earlier positions.
            window: truncated attention to |i − j| ≤ ``window``.
            need_weights: also return the attention weights.

        Returns:
            ``(x (B, L, E), weights (B, H, L, L) or None)``.
        """
        attended, weights = self.self_attn(
            sublayer_input(x, self.norm1, self.norm_first),
            key_padding_mask=key_padding_mask,
            mask=mask,
            causal=causal,
            window=window,
            need_weights=need_weights,
            average_weights=False,
        )
        x = add_and_norm(x, self.dropout1(attended), self.norm1, self.norm_first)
        transformed = self.feedforward(sublayer_input(x, self.norm2, self.norm_first))
        x = add_and_norm(x, self.dropout2(transformed), self.norm2, self.norm_first)
        return x, weights

    @classmethod
    def from_torch(cls, layer: nn.TransformerEncoderLayer) -> EncoderBlock:
        """An equivalent block with the weights of a ``torch.nn.TransformerEncoderLayer``.

        Copies the attention, ``linear1``/``linear2``, ``norm1``/``norm2``, the activation
        (relu or exact gelu; anything else is refused), ``norm_first``, ε and bias. The
        result is batch-first whatever ``layer`` says, and in the same train/eval mode.
        """
        attention = MultiHeadAttention.from_torch(layer.self_attn)
        feedforward = FeedForward.from_torch(layer)
        new = cls(
            attention.embed_dim,
            attention.num_heads,
            feedforward.in_proj.out_features,
            dropout=layer.dropout1.p,
            activation=feedforward.activation_name,
            norm_first=layer.norm_first,
            layer_norm_eps=layer.norm1.eps,
            bias=layer.linear1.bias is not None,
        )
        new.self_attn, new.feedforward = attention, feedforward
        copy_norms(new, layer, ("norm1", "norm2"))
        return new.train(layer.training)


def copy_norms(new: nn.Module, layer: nn.Module, names: tuple[str, ...]) -> None:
    """Replace ``new``'s layer norms called ``names`` with copies of ``layer``'s."""
    for name in names:
        setattr(new, name, copy.deepcopy(getattr(layer, name)))
