"""The Conformer: self-attention and convolution in one block (Gulati et al. 2020).

Lecture 000 (§Self-attention v.s. CNN) ends "you can also use both", and points the
speaker-identification homework's strong baseline at the Conformer ("Conformer:
Convolution-augmented Transformer for Speech Recognition", Gulati et al., Interspeech
2020, arXiv:2005.08100). Self-attention relates frames however far apart; a depthwise
convolution models the local patterns speech is full of. One block (§2, Fig. 1) is a
*macaron* (Lu et al. 2019): two half-step feed-forward modules around attention and
convolution, each module pre-normalised inside a residual connection::

    x̃  = x + ½ FFN(x)
    x′ = x̃ + MHSA(x̃)
    x″ = x′ + Conv(x′)
    y  = LayerNorm(x″ + ½ FFN(x″))

FFN   = LayerNorm → Linear(E → F) → Swish → Dropout → Linear(F → E) → Dropout   (§2.3)
MHSA  = LayerNorm → multi-head self-attention → Dropout                          (§2.1)
Conv  = LayerNorm → pointwise conv (E → 2E) → GLU → depthwise conv (kernel K)
        → BatchNorm → Swish → pointwise conv (E → E) → Dropout                   (§2.2)

Padding never reaches a real position: attention ignores padded keys, padded frames are
zeroed before the depthwise convolution (as the zeros past a sequence's ends are), and
batch normalisation computes its statistics over the real frames only.

The paper's relative sinusoidal positions (Transformer-XL, Dai et al. 2019) correspond
here to a relative encoding inside attention (``"relative"``, ``"rotary"``, ``"alibi"``);
truncated attention for long utterances is the ``"window"`` attention kernel.
"""

from __future__ import annotations

from typing import Unpack

import torch.nn.functional as F
from torch import Tensor, nn

from selfattn.attention.masks import MaskArgs
from selfattn.blocks.config import BlockConfig, ConvNormName, check_convolution
from selfattn.blocks.encoder_block import self_attention
from selfattn.positional.base import RelativePositional

__all__ = [
    "ConformerBlock",
    "ConformerFeedForward",
    "ConvNormName",
    "ConvolutionModule",
    "MaskedBatchNorm1d",
]


class ConformerFeedForward(nn.Module):
    """The Conformer's feed-forward module (§2.3), pre-normalised, Swish-activated.

    ``(B, L, E) → (B, L, E)``; the block adds half of it to its input.

    Args:
        embed_dim: E.
        ffn_dim: hidden size F (the paper: 4E).
        dropout: on the output, and after the activation unless ``hidden_dropout`` says
            otherwise.
        layer_norm_eps: ε of the layer norm.
        bias: biases in the linear layers and the layer norm.
        hidden_dropout: after the activation alone (``None``: ``dropout``).
    """

    def __init__(
        self,
        embed_dim: int,
        ffn_dim: int,
        dropout: float = 0.0,
        layer_norm_eps: float = 1e-5,
        *,
        bias: bool = True,
        hidden_dropout: float | None = None,
    ) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(embed_dim, eps=layer_norm_eps, bias=bias)
        self.in_proj = nn.Linear(embed_dim, ffn_dim, bias=bias)
        self.out_proj = nn.Linear(ffn_dim, embed_dim, bias=bias)
        self.hidden_dropout = nn.Dropout(dropout if hidden_dropout is None else hidden_dropout)
        self.dropout = nn.Dropout(dropout)

    @classmethod
    def from_config(cls, config: BlockConfig) -> ConformerFeedForward:
        """The module of a :class:`ConformerBlock` with ``config``: its sizes, ``dropout``
        (and ``ffn_dropout`` inside), ``layer_norm_eps`` and ``bias``."""
        return cls(
            config.embed_dim,
            config.ffn_dim,
            config.dropout,
            config.layer_norm_eps,
            bias=config.bias,
            hidden_dropout=config.hidden_dropout,
        )

    def forward(self, x: Tensor) -> Tensor:
        """Args: x ``(B, L, E)``. Returns ``(B, L, E)``."""
        hidden = self.hidden_dropout(F.silu(self.in_proj(self.norm(x))))  # Swish (β = 1): SiLU
        return self.dropout(self.out_proj(hidden))


class MaskedBatchNorm1d(nn.BatchNorm1d):
    """Batch normalisation over channels whose statistics come from real frames only.

    ``torch.nn.BatchNorm1d`` on ``(B, C, L)`` averages over every frame of the batch,
    padding included, so in training the amount of padding would change real outputs.
    Here the batch is the set of real frames: they are gathered into ``(N, C)``,
    normalised there (batch statistics and running estimates as usual), and scattered
    back; padded frames come out as zeros.
    """

    def forward(self, x: Tensor, key_padding_mask: Tensor | None = None) -> Tensor:
        """Args:
            x: ``(B, C, L)``.
            key_padding_mask: ``(B, L)`` boolean, True at padding.

        Returns:
            ``(B, C, L)``.
        """
        if key_padding_mask is None:
            return super().forward(x)
        frames = x.transpose(1, 2)  # (B, L, C)
        real = ~key_padding_mask
        out = frames.new_zeros(frames.shape)
        out[real] = super().forward(frames[real])  # (N, C) over the N real frames
        return out.transpose(1, 2)


class ConvolutionModule(nn.Module):
    """The Conformer's convolution module (§2.2, Fig. 2): ``(B, L, E) → (B, L, E)``.

    The depthwise convolution has one K-tap filter per channel, zero-padded so the output
    has the input's length ("same"): frame i sees frames i − ⌊(K − 1)/2⌋ … i + ⌊K/2⌋
    (symmetric for odd K), or i − K + 1 … i when ``causal``.

    Args:
        embed_dim: E, the channels.
        kernel_size: K, the depthwise filter's length (the paper: 32; ESPnet's odd 31
            keeps the window symmetric).
        dropout: on the output.
        norm: ``"batch"`` (the paper; statistics over real frames, see
            :class:`MaskedBatchNorm1d`) or ``"layer"``.
        layer_norm_eps: ε of the layer norm(s).
        bias: biases in the convolutions and layer norm(s).
    """

    def __init__(
        self,
        embed_dim: int,
        kernel_size: int = 31,
        *,
        dropout: float = 0.0,
        norm: ConvNormName = "batch",
        layer_norm_eps: float = 1e-5,
        bias: bool = True,
    ) -> None:
        super().__init__()
        check_convolution(kernel_size, norm)
        self.kernel_size = kernel_size
        self.layer_norm = nn.LayerNorm(embed_dim, eps=layer_norm_eps, bias=bias)
        self.pointwise_in = nn.Conv1d(embed_dim, 2 * embed_dim, 1, bias=bias)
        self.depthwise = nn.Conv1d(embed_dim, embed_dim, kernel_size, groups=embed_dim, bias=bias)
        self.norm: MaskedBatchNorm1d | nn.LayerNorm = (
            MaskedBatchNorm1d(embed_dim)
            if norm == "batch"
            else nn.LayerNorm(embed_dim, eps=layer_norm_eps, bias=bias)
        )
        self.pointwise_out = nn.Conv1d(embed_dim, embed_dim, 1, bias=bias)
        self.dropout = nn.Dropout(dropout)

    def forward(
        self, x: Tensor, *, key_padding_mask: Tensor | None = None, causal: bool = False
    ) -> Tensor:
        """Args:
            x: ``(B, L, E)``.
            key_padding_mask: ``(B, L)`` boolean, True at padding.
            causal: frame i sees only frames ≤ i (left padding only). In training, batch
                norm still pools statistics over all real frames; use ``norm="layer"`` for
                strict causality there.

        Returns:
            ``(B, L, E)``.
        """
        h = self.layer_norm(x).transpose(1, 2)  # (B, E, L): channels first for Conv1d
        h = F.glu(self.pointwise_in(h), dim=1)  # (B, 2E, L) → (B, E, L)
        if key_padding_mask is not None:
            # Padding must look like the zeros past the sequence's end.
            h = h.masked_fill(key_padding_mask[:, None, :], 0.0)
        k = self.kernel_size
        h = self.depthwise(F.pad(h, (k - 1, 0) if causal else ((k - 1) // 2, k // 2)))
        if isinstance(self.norm, MaskedBatchNorm1d):
            h = self.norm(h, key_padding_mask)
        else:
            h = self.norm(h.transpose(1, 2)).transpose(1, 2)
        h = self.pointwise_out(F.silu(h))  # (B, E, L)
        return self.dropout(h.transpose(1, 2))


class ConformerBlock(nn.Module):
    """One Conformer block: ½FFN, self-attention, convolution, ½FFN, LayerNorm.

    Reads from ``config``: the sizes, ``dropout`` (every module's output, inside the
    feed-forward modules unless ``ffn_dropout``, and the attention weights unless
    ``attention_dropout``), the
    attention's score, normaliser, heads and ``include_self``, ``conv_kernel_size``,
    ``conv_norm``, ``layer_norm_eps`` and ``bias``. Its feed-forward modules are always
    Swish and every module is pre-normalised: ``activation`` and ``norm_first`` are the
    transformer blocks' (a config's ``model.norm_first = false`` is refused for it).

    Args:
        config: every option of the block.
        positional: a relative positional encoding used inside attention, or ``None``.
        kernel: the attention kernel built from ``config.attention``, e.g.
            ``build_kernel("window", window=w)`` for truncated attention; ``None``: dense.
    """

    def __init__(
        self,
        config: BlockConfig,
        *,
        positional: RelativePositional | None = None,
        kernel: nn.Module | None = None,
    ) -> None:
        super().__init__()
        self.config = config
        embed_dim, eps = config.embed_dim, config.layer_norm_eps
        self.feedforward1 = ConformerFeedForward.from_config(config)
        self.attention_norm = nn.LayerNorm(embed_dim, eps=eps, bias=config.bias)
        self.self_attn = self_attention(config, positional=positional, kernel=kernel)
        self.attention_out_dropout = nn.Dropout(config.dropout)
        self.conv = ConvolutionModule(
            embed_dim,
            config.conv_kernel_size,
            dropout=config.dropout,
            norm=config.conv_norm,
            layer_norm_eps=eps,
            bias=config.bias,
        )
        self.feedforward2 = ConformerFeedForward.from_config(config)
        self.final_norm = nn.LayerNorm(embed_dim, eps=eps, bias=config.bias)

    def forward(
        self,
        x: Tensor,
        *,
        need_weights: bool = False,
        **masks: Unpack[MaskArgs],
    ) -> tuple[Tensor, Tensor | None]:
        """Args:
            x: ``(B, L, E)``.
            need_weights: also return the attention weights (dense attention only).
            **masks: :class:`~selfattn.attention.MaskArgs` for the self-attention; the
                convolution reads ``key_padding_mask`` (padding zeroed) and ``causal``
                (it sees only the past: streaming); ``mask`` and ``window`` are for the
                attention only.

        Returns:
            ``(x (B, L, E), weights (B, H, L, L) or None)``, as
            :class:`~selfattn.blocks.EncoderBlock`.
        """
        x = x + 0.5 * self.feedforward1(x)
        attended, weights = self.self_attn(
            self.attention_norm(x), need_weights=need_weights, average_weights=False, **masks
        )
        x = x + self.attention_out_dropout(attended)
        x = x + self.conv(
            x, key_padding_mask=masks.get("key_padding_mask"), causal=masks.get("causal", False)
        )
        x = self.final_norm(x + 0.5 * self.feedforward2(x))
        return x, weights
