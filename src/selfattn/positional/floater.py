"""FLOATER: positions from a continuous dynamical system (Liu et al. 2020, "Learning to
Encode Position for Transformer with Continuous Dynamical Model", ICML).

One of the learned generators the lecture shows (§Positional Encoding). The encoding is a
trajectory p(t) of the neural ODE

    dp/dt = h(t, p(t); θ),    p(0) learned,

with h a small MLP, and position i is read off at t = i·Δ. It is data-driven like a
learned table, but continuous, so it is defined for every position (it extrapolates past
``max_len``), and its parameter count does not grow with ``max_len``. It is the continuous
counterpart of the RNN generator in :mod:`selfattn.positional.rnn`.

The ODE is integrated by fixed-step fourth-order Runge–Kutta, differentiated by plain
autograd through the steps (the paper uses an adjoint solver; at these sizes the direct
route is simpler and exact).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor, nn

from selfattn.positional.base import SequentialPositional

Field = Callable[[float, Tensor], Tensor]


def rk4_step(field: Field, t: float, p: Tensor, dt: float) -> Tensor:
    """One classical Runge–Kutta step of ``dp/dt = field(t, p)`` from ``t`` to ``t + dt``."""
    k1 = field(t, p)
    k2 = field(t + dt / 2, p + dt / 2 * k1)
    k3 = field(t + dt / 2, p + dt / 2 * k2)
    k4 = field(t + dt, p + dt * k3)
    return p + dt / 6 * (k1 + 2 * k2 + 2 * k3 + k4)


class FloaterPositional(SequentialPositional):
    """Adds p(i·Δ), the solution of a learned ODE, to the vector at position i.

    Args:
        embed_dim: E, the dimension of p.
        max_len: sets the default time step Δ = 1 / max_len, so the training range of
            positions maps to t ∈ [0, 1]; longer sequences integrate further.
        hidden_dim: width of the MLP h(t, p) = W₂ tanh(W₁ [p; t] + b₁) + b₂.
        delta: Δ, the time between consecutive positions (default ``1 / max_len``).
        substeps: RK4 steps per position; more is more accurate and slower.
    """

    def __init__(
        self,
        embed_dim: int,
        max_len: int = 512,
        hidden_dim: int = 64,
        delta: float | None = None,
        substeps: int = 1,
    ) -> None:
        super().__init__()
        if substeps < 1:
            raise ValueError(f"substeps must be >= 1, got {substeps}")
        delta = 1.0 / max_len if delta is None else delta
        if delta <= 0:
            raise ValueError(f"delta must be positive, got {delta}")
        self.delta, self.substeps = delta, substeps
        self.start = nn.Parameter(0.02 * torch.randn(embed_dim))  # p(0), small
        self.field = nn.Sequential(
            nn.Linear(embed_dim + 1, hidden_dim), nn.Tanh(), nn.Linear(hidden_dim, embed_dim)
        )

    def velocity(self, t: float, p: Tensor) -> Tensor:
        """h(t, p): ``(E,)`` → ``(E,)``."""
        return self.field(torch.cat([p, p.new_full((1,), t)]))

    def initial(self) -> Tensor:
        """p(0), shape ``(E,)``."""
        return self.start

    def step(self, state: Tensor, index: int) -> Tensor:
        """p((index + 1)·Δ) from p(index·Δ) by ``substeps`` RK4 steps."""
        dt = self.delta / self.substeps
        t = index * self.delta
        for sub in range(self.substeps):
            state = rk4_step(self.velocity, t + sub * dt, state, dt)
        return state

    def extra_repr(self) -> str:
        return f"delta={self.delta:g}, substeps={self.substeps}"
