"""The two kinds of positional encoding (lecture 000, §Positional Encoding).

Self-attention alone has no notion of order: permuting the input vectors permutes the
outputs the same way. A positional encoding breaks that symmetry in one of two places:

* :class:`AbsolutePositional` adds a vector e^i to the input a^i (sinusoidal, learned,
  FLOATER, RNN-generated). It is applied once, before the first block.
* :class:`RelativePositional` acts inside attention, so the score between positions i and
  j depends on their offset (Shaw et al. relative, rotary, ALiBi). ``MultiHeadAttention``
  calls its three hooks; each default does nothing, so a variant overrides only what it
  changes.
"""

from __future__ import annotations

import abc

import torch
from torch import Tensor, nn


class AbsolutePositional(nn.Module, abc.ABC):
    """Adds a position vector to every input vector: ``x + e[offset : offset + L]``."""

    @abc.abstractmethod
    def encoding(self, length: int, offset: int = 0) -> Tensor:
        """The encodings of positions ``offset … offset + length - 1``, shape ``(L, E)``."""

    def forward(self, x: Tensor, offset: int = 0) -> Tensor:
        """Args:
            x: ``(B, L, E)`` input vectors.
            offset: position of ``x[:, 0]`` (non-zero during incremental decoding).

        Returns:
            ``(B, L, E)``: ``x`` plus the encoding of each position.
        """
        if x.dim() != 3:
            raise ValueError(
                f"{type(self).__name__} expects (B, L, E) input, got shape {tuple(x.shape)}"
            )
        return x + self.encoding(x.shape[1], offset).to(dtype=x.dtype, device=x.device)


class RelativePositional(nn.Module):
    """Hooks that make attention depend on the offset between query and key positions.

    Positions are integer tensors: ``q_pos`` of shape ``(T,)`` and ``k_pos`` of shape
    ``(S,)``; during incremental decoding ``q_pos`` starts at ``S - T``.
    """

    #: True when :meth:`value_term` is used: attention weights must then be materialised.
    needs_weights: bool = False

    def rotate(self, q: Tensor, k: Tensor, q_pos: Tensor, k_pos: Tensor) -> tuple[Tensor, Tensor]:
        """Transform queries ``(B, H, T, D)`` and keys ``(B, Hk, S, D)`` before scoring."""
        return q, k

    def score_bias(self, q: Tensor, q_pos: Tensor, k_pos: Tensor, scale: float) -> Tensor | None:
        """An additive score term broadcastable to ``(B, H, T, S)``, or ``None``.

        ``scale`` is the factor the attention applies to ``q·k`` (1/√D for scaled dot),
        so a term built from ``q`` can be scaled the same way.
        """
        return None

    def value_term(self, weights: Tensor, q_pos: Tensor, k_pos: Tensor) -> Tensor | None:
        """An additive output term ``(B, H, T, D)`` from the weights ``(B, H, T, S)``."""
        return None


def relative_offsets(q_pos: Tensor, k_pos: Tensor) -> Tensor:
    """``(T, S)`` matrix of ``j - i`` for query positions i and key positions j."""
    return k_pos[None, :] - q_pos[:, None]


def positions(length: int, offset: int = 0, device: torch.device | None = None) -> Tensor:
    """``offset, offset + 1, …, offset + length - 1`` as a long tensor."""
    return torch.arange(offset, offset + length, device=device)
