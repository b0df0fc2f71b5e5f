"""A convolution is a restricted self-attention, exactly (lecture 000, §Self-attention v.s. CNN).

The lecture: "CNN is simplified self-attention" — a CNN attends only inside a hand-set
receptive field, self-attention learns where to look — and it points to Cordonnier,
Loukas & Jaggi (ICLR 2020), "On the Relationship between Self-Attention and Convolutional
Layers", whose Theorem 1 says a multi-head self-attention layer with K² heads and a
relative positional encoding can express any K×K convolution. :func:`attention_from_conv`
builds that construction with the library's ordinary
:class:`~selfattn.attention.MultiHeadAttention` over the image's pixels:

* one head per kernel offset Δ_h = (a − p_r, b − p_c) for kernel cell (a, b), with p the
  'same' padding before the first row/column;
* query and key projections zero, so every content score ``q·k`` is 0;
* a relative positional score per head (:class:`~selfattn.positional.grid.Relative2DBias`)
  that is 0 at offset Δ_h and −inf at every other offset, so head h's softmax puts all its
  weight on the pixel at p + Δ_h. Cordonnier et al. reach this with the quadratic encoding
  −α‖δ − Δ_h‖² in the limit α → ∞ (their Lemma 1); the table holds that limit, which makes
  the equality exact rather than approximate;
* value projection the identity, so head h outputs the input pixel at p + Δ_h;
* output projection: head h's ``C_out × C_in`` block is the kernel slice ``W[:, :, a, b]``
  and the output bias is the conv bias, so ``out(p) = Σ_h W_h x(p + Δ_h) + b`` — the
  convolution.

A pixel whose p + Δ_h lies outside the image has no key for head h; attention then gives
that head a zero output, which is the convolution's zero padding.

The construction materialises a ``(K², L, L)`` bias for L = H·W pixels: it demonstrates
the equivalence (and gives an attention layer initialised as a given convolution), it is
not a fast way to convolve.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from selfattn.attention.multihead import MultiHeadAttention
from selfattn.positional.grid import Relative2DBias
from selfattn.vision.embed import check_image, image_to_vectors, vectors_to_image


class ConvAsAttention(nn.Module):
    """Multi-head self-attention over pixels with a 2-D relative positional score.

    Built by :func:`attention_from_conv`; the module itself is general: any
    ``MultiHeadAttention`` over C_in-dimensional pixels and any ``Relative2DBias`` with one
    table per head.

    Args:
        attention: self-attention on ``(B, H·W, C_in)`` pixel vectors; its output
            projection gives the C_out output channels.
        relative: per-head score bias over 2-D offsets (``num_heads`` must match).
    """

    def __init__(self, attention: MultiHeadAttention, relative: Relative2DBias) -> None:
        super().__init__()
        if relative.num_heads != attention.num_heads:
            raise ValueError(
                f"ConvAsAttention: the relative bias has {relative.num_heads} heads but the "
                f"attention has {attention.num_heads}"
            )
        self.attention = attention
        self.relative = relative
        self.in_channels = attention.embed_dim
        self.out_channels = attention.out_proj.out_features

    def forward(self, image: Tensor) -> Tensor:
        """Args:
            image: ``(B, C_in, H, W)``.

        Returns:
            ``(B, C_out, H, W)``.
        """
        check_image(image, self.in_channels, type(self).__name__)
        rows, cols = image.shape[-2:]
        pixels = image_to_vectors(image)  # (B, L, C_in)
        bias = self.relative(rows, cols).to(pixels.dtype)  # (heads, L, L)
        out, _ = self.attention(pixels, mask=bias)  # (B, L, C_out)
        return vectors_to_image(out, rows, cols)


def attention_from_conv(conv: nn.Conv2d) -> ConvAsAttention:
    """Self-attention that computes exactly ``conv(image)`` (Cordonnier et al., Theorem 1).

    Args:
        conv: a K_h×K_w convolution with stride 1, dilation 1, groups 1 and zero 'same'
            padding (``padding="same"``, or ``padding=(K_h // 2, K_w // 2)`` for odd sizes).

    Returns:
        A :class:`ConvAsAttention` with K_h·K_w heads of dimension C_in, on the conv's
        device and dtype, holding copies of its weights.

    Raises:
        ValueError: a convolution this construction does not cover.
    """
    _check_conv(conv)
    weight = conv.weight.detach()  # (C_out, C_in, K_h, K_w)
    c_out, c_in, k_h, k_w = weight.shape
    heads = k_h * k_w
    has_bias = conv.bias is not None
    attention = MultiHeadAttention(c_in, heads, head_dim=c_in, bias=has_bias)
    if c_out != c_in:
        # MultiHeadAttention's output width is its embed_dim (C_in, the pixel size); a conv
        # may change the channel count, so its output projection is resized to C_out.
        attention.out_proj = nn.Linear(heads * c_in, c_out, bias=has_bias)
    attention.to(device=weight.device, dtype=weight.dtype)

    # 'same' padding puts (K − 1) // 2 rows/columns before the image (PyTorch's rule, also
    # for even K), so kernel cell (a, b) reads the pixel at offset (a − p_r, b − p_c).
    pad_r, pad_c = (k_h - 1) // 2, (k_w - 1) // 2
    # One row/column beyond the kernel's reach, clamped to for farther offsets: every offset
    # outside the receptive field maps to an entry of -inf, whatever the image size.
    reach_r, reach_c = max(pad_r, k_h - 1 - pad_r) + 1, max(pad_c, k_w - 1 - pad_c) + 1
    relative = Relative2DBias(heads, reach_r + 1, reach_c + 1, extrapolation="clamp")
    relative.to(device=weight.device, dtype=weight.dtype)

    with torch.no_grad():
        attention.q_proj.weight.zero_()
        attention.k_proj.weight.zero_()
        eye = torch.eye(c_in, dtype=weight.dtype, device=weight.device)
        attention.v_proj.weight.copy_(eye.repeat(heads, 1))  # every head's v = the pixel
        # Head h = a·K_w + b: its block of columns is W[:, :, a, b].
        attention.out_proj.weight.copy_(weight.permute(0, 2, 3, 1).reshape(c_out, heads * c_in))
        for proj in (attention.q_proj, attention.k_proj, attention.v_proj):
            if proj.bias is not None:
                proj.bias.zero_()
        if conv.bias is not None:
            attention.out_proj.bias.copy_(conv.bias)
        relative.table.fill_(float("-inf"))
        for head in range(heads):
            a, b = divmod(head, k_w)
            d_row, d_col = a - pad_r, b - pad_c
            relative.table[head, d_row + relative.max_rows - 1, d_col + relative.max_cols - 1] = 0
    # The -inf entries are the receptive field's hard edge, not something to learn.
    relative.table.requires_grad_(False)
    return ConvAsAttention(attention, relative)


def _check_conv(conv: nn.Conv2d) -> None:
    """One-line errors for convolutions outside Theorem 1's construction."""
    if not isinstance(conv, nn.Conv2d):
        raise TypeError(f"attention_from_conv needs an nn.Conv2d, got {type(conv).__name__}")
    k_h, k_w = conv.kernel_size
    problems = {
        "stride": (conv.stride, (1, 1)),
        "dilation": (conv.dilation, (1, 1)),
        "groups": (conv.groups, 1),
        "padding_mode": (conv.padding_mode, "zeros"),
    }
    for name, (value, wanted) in problems.items():
        if value != wanted:
            raise ValueError(f"attention_from_conv: needs {name}={wanted!r}, got {value!r}")
    same = conv.padding == "same" or (
        k_h % 2 == 1 and k_w % 2 == 1 and tuple(conv.padding) == (k_h // 2, k_w // 2)
    )
    if not same:
        raise ValueError(
            f"attention_from_conv: needs 'same' zero padding (padding='same' or "
            f"{(k_h // 2, k_w // 2)} for an odd kernel), got padding={conv.padding!r} for a "
            f"{k_h}×{k_w} kernel"
        )
