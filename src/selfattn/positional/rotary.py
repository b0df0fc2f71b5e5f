"""Rotary position embedding, RoPE (Su et al. 2021, "RoFormer: Enhanced Transformer with
Rotary Position Embedding").

Rather than adding e^i to a^i (lecture 000, §Positional Encoding), RoPE rotates each query
and key: channel pair m of the vector at position p is turned by the angle p·θ_m, with
θ_m = base^(−2m/D). A rotation preserves norms, and ⟨R_i q, R_j k⟩ = ⟨q, R_{j−i} k⟩, so the
score depends on positions only through the offset j − i. No parameters.

Pairs follow the "rotate half" layout (GPT-NeoX, LLaMA): channel m pairs with m + D/2.
"""

from __future__ import annotations

import torch
from torch import Tensor

from selfattn.positional.base import RelativePositional, check_channel_pairs


def rotate_half(x: Tensor) -> Tensor:
    """``[x₁, x₂] → [−x₂, x₁]`` on the last dimension: a 90° turn of every pair."""
    first, second = x.chunk(2, dim=-1)
    return torch.cat([-second, first], dim=-1)


class RotaryPositional(RelativePositional):
    """Rotates queries and keys by their position.

    Args:
        head_dim: D, must be even.
        base: θ_m = base^(−2m/D); 10000 in the paper.
    """

    def __init__(self, head_dim: int, base: float = 10000.0) -> None:
        super().__init__()
        check_channel_pairs("rotary", "head_dim", head_dim, base)
        self.head_dim, self.base = head_dim, base
        inv_freq = base ** -(torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim)
        self.inv_freq: Tensor
        self.register_buffer("inv_freq", inv_freq, persistent=False)  # (D/2,) θ_m

    def rotate_at(self, x: Tensor, pos: Tensor) -> Tensor:
        """Rotate ``x`` of shape ``(…, L, D)`` by positions ``pos`` of shape ``(L,)``."""
        angle = pos.to(self.inv_freq)[:, None] * self.inv_freq  # (L, D/2)
        angle = torch.cat([angle, angle], dim=-1)  # (L, D): pair m and m + D/2 share θ_m
        cos, sin = angle.cos().to(x.dtype), angle.sin().to(x.dtype)
        return x * cos + rotate_half(x) * sin

    def rotate(self, q: Tensor, k: Tensor, q_pos: Tensor, k_pos: Tensor) -> tuple[Tensor, Tensor]:
        """Rotate queries ``(B, H, T, D)`` and keys ``(B, Hk, S, D)``; ``Hk`` may differ."""
        if q.shape[-1] != self.head_dim or k.shape[-1] != self.head_dim:
            raise ValueError(
                f"rotary encoding built for head_dim {self.head_dim}, got q {tuple(q.shape)} "
                f"and k {tuple(k.shape)}"
            )
        return self.rotate_at(q, q_pos), self.rotate_at(k, k_pos)

    def extra_repr(self) -> str:
        return f"head_dim={self.head_dim}, base={self.base}"
