"""ALiBi, attention with linear biases (Press, Smith & Lewis 2022, "Train Short, Test
Long: Attention with Linear Biases Enables Input Length Extrapolation", ICLR).

No e^i is added to the input (lecture 000, §Positional Encoding); instead each head h
subtracts a penalty proportional to distance from its scores:

    e_ij ← e_ij − m_h · |j − i|,

with fixed head slopes m_h forming a geometric sequence, so some heads look far and some
near. No parameters, and a model trained on short sequences runs on longer ones.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from selfattn.positional.base import RelativePositional, relative_offsets


def alibi_slopes(num_heads: int) -> Tensor:
    """The paper's head slopes, shape ``(H,)``.

    For H a power of two they are ``2^(−8h/H)`` for h = 1 … H (H = 8: 1/2, 1/4, …, 1/256).
    Otherwise, as in the paper's reference code, take the slopes of the largest power of
    two n < H and fill the remaining H − n heads with every other slope of 2n, which
    interleaves between the first ones.
    """
    if num_heads < 1:
        raise ValueError(f"num_heads must be >= 1, got {num_heads}")

    def geometric(n: int) -> list[float]:
        return [2.0 ** (-8.0 * h / n) for h in range(1, n + 1)]

    closest = 2 ** int(math.log2(num_heads))
    slopes = geometric(closest) + geometric(2 * closest)[0::2][: num_heads - closest]
    return torch.tensor(slopes, dtype=torch.float32)


class ALiBiPositional(RelativePositional):
    """Adds ``−m_h · distance(i, j)`` to head h's scores.

    Args:
        num_heads: H, one slope per head.
        causal_only: use the decoder form ``−m_h · (i − j)`` for keys at or before the
            query (j ≤ i) and no bias for later keys, which a causal mask is expected to
            hide. The default symmetric form ``−m_h · |j − i|`` suits encoders.
    """

    def __init__(self, num_heads: int, causal_only: bool = False) -> None:
        super().__init__()
        self.causal_only = causal_only
        self.slopes: Tensor
        self.register_buffer("slopes", alibi_slopes(num_heads), persistent=False)

    def score_bias(self, q: Tensor, q_pos: Tensor, k_pos: Tensor, scale: float) -> Tensor:
        """The linear penalties; ``q`` only supplies dtype and device, ``scale`` is unused.

        Returns:
            ``(1, H, T, S)``.
        """
        offsets = relative_offsets(q_pos, k_pos).to(q.device)  # (T, S): j − i
        distance = (-offsets).clamp(min=0) if self.causal_only else offsets.abs()
        slopes = self.slopes.to(device=q.device, dtype=q.dtype)
        return -slopes[None, :, None, None] * distance.to(q.dtype)

    def extra_repr(self) -> str:
        return f"num_heads={len(self.slopes)}, causal_only={self.causal_only}"
