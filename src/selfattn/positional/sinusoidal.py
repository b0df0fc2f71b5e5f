"""Sinusoidal positional encoding (Vaswani et al. 2017, "Attention Is All You Need", §3.5).

The lecture's first example of a hand-crafted e^i (§Positional Encoding): no parameters,
every position gets a vector from a fixed rule, so there is no "trained on 128, test on
129" problem:

    PE(pos, 2i)     = sin(pos / base^(2i / E))
    PE(pos, 2i + 1) = cos(pos / base^(2i / E))

with base 10000. Each channel pair is a clock of a different period, and PE(pos + k) is a
rotation of PE(pos), which is what lets attention read relative offsets from it.
"""

from __future__ import annotations

import torch
from torch import Tensor

from selfattn.positional.base import AbsolutePositional, check_channel_pairs, check_span


def sinusoidal_table(
    length: int,
    embed_dim: int,
    offset: int = 0,
    base: float = 10000.0,
    device: torch.device | None = None,
) -> Tensor:
    """The closed-form table for positions ``offset … offset + length - 1``.

    Computed in float64 (angles of large positions lose precision in float32) and
    returned as float32.

    Returns:
        ``(L, E)`` with sines in the even channels and cosines in the odd ones.
    """
    position = torch.arange(offset, offset + length, dtype=torch.float64, device=device)
    exponent = torch.arange(0, embed_dim, 2, dtype=torch.float64, device=device) / embed_dim
    angle = position[:, None] * base**-exponent  # (L, E/2)
    table = torch.stack([angle.sin(), angle.cos()], dim=-1)  # (L, E/2, 2): interleave
    return table.flatten(1).to(torch.float32)


class SinusoidalPositional(AbsolutePositional):
    """Adds the fixed sin/cos encoding; works for any length and offset.

    Args:
        embed_dim: E, must be even (channels come in sin/cos pairs).
        max_len: rows precomputed into a buffer; longer spans are computed on the fly.
        base: the wavelength scale (10000 in the paper).
    """

    def __init__(self, embed_dim: int, max_len: int = 512, base: float = 10000.0) -> None:
        super().__init__()
        check_channel_pairs("sinusoidal", "embed_dim", embed_dim, base)
        self.embed_dim, self.base = embed_dim, base
        table = sinusoidal_table(max_len, embed_dim, base=base)
        self.table: Tensor
        self.register_buffer("table", table, persistent=False)

    def encoding(self, length: int, offset: int = 0) -> Tensor:
        """The encodings of positions ``offset … offset + length - 1``, shape ``(L, E)``."""
        check_span(length, offset)
        if offset + length <= len(self.table):
            return self.table[offset : offset + length]
        return sinusoidal_table(length, self.embed_dim, offset, self.base, self.table.device)

    def extra_repr(self) -> str:
        return f"embed_dim={self.embed_dim}, base={self.base}"
