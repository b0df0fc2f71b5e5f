"""RNN-generated positional encoding (lecture 000, §Positional Encoding; the discrete
model that FLOATER, Liu et al. 2020, generalises to continuous time).

A recurrent network walks over the positions and its hidden state at step i is e^i:

    e^0 learned,    e^{i+1} = GRUCell(u, e^i),

with u a learned input vector fed at every step. Like a learned table it is data-driven;
unlike one, it is defined for every position, and its parameter count does not depend on
``max_len``. The GRU's gated convex update keeps every e^i in (−1, 1), so long rollouts
stay bounded.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from selfattn.positional.base import SequentialPositional


class RNNPositional(SequentialPositional):
    """Adds the hidden state of a GRU unrolled over positions.

    Args:
        embed_dim: E, the GRU's hidden size.
        input_dim: size of the learned per-step input u.
    """

    def __init__(self, embed_dim: int, input_dim: int = 16) -> None:
        super().__init__()
        if input_dim < 1:
            raise ValueError(f"input_dim must be >= 1, got {input_dim}")
        self.start = nn.Parameter(0.02 * torch.randn(embed_dim))  # e^0
        self.step_input = nn.Parameter(torch.randn(input_dim))  # u
        self.cell = nn.GRUCell(input_dim, embed_dim)

    def initial(self) -> Tensor:
        """e^0, shape ``(E,)``."""
        return self.start

    def step(self, state: Tensor, index: int) -> Tensor:
        """e^{index + 1} = GRUCell(u, e^{index}), shape ``(E,)``."""
        return self.cell(self.step_input, state)
