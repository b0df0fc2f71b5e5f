"""The two kinds of positional encoding (lecture 000, §Positional Encoding).

Self-attention alone has no notion of order: permuting the input vectors permutes the
outputs the same way. A positional encoding breaks that symmetry in one of two places:

* :class:`AbsolutePositional` adds a vector e^i to the input a^i (sinusoidal, learned,
  FLOATER, RNN-generated). It is applied once, before the first block.
  :class:`SequentialPositional` is the special case where e^{i+1} is computed from e^i.
* :class:`RelativePositional` acts inside attention, so the score between positions i and
  j depends on their offset (Shaw et al. relative, rotary, ALiBi). ``MultiHeadAttention``
  calls its three hooks; each default does nothing, so a variant overrides only what it
  changes.

Every encoding is built by :meth:`RegistryBuilt.build` from the same arguments, so the
registry in :mod:`selfattn.positional` can construct any of them: the constructor takes,
by name, those of ``embed_dim``, ``num_heads``, ``head_dim`` and ``max_len`` it needs, and
its other parameters are the encoding's own options.
"""

from __future__ import annotations

import abc
import inspect
from typing import Any, Self

import torch
from torch import Tensor, nn

#: The registry's arguments common to every encoding, passed to a constructor by name
#: where it has a parameter of that name (``head_dim``: E // H, each head's size).
REGISTRY_ARGUMENTS = ("embed_dim", "num_heads", "head_dim", "max_len")


class RegistryBuilt:
    """Built from the registry's common arguments (:data:`REGISTRY_ARGUMENTS`)."""

    @classmethod
    def build(cls, *, embed_dim: int, num_heads: int, max_len: int = 512, **options: Any) -> Self:
        """Construct from the registry's common arguments, passing those the constructor
        names (the rest, e.g. ``num_heads`` to an absolute encoding, are unused), and the
        encoding's own keyword ``options``."""
        wanted = inspect.signature(cls).parameters
        common: dict[str, int] = {"embed_dim": embed_dim, "num_heads": num_heads}
        if "head_dim" in wanted:
            common["head_dim"] = head_dim_of(embed_dim, num_heads)
        common["max_len"] = max_len
        return cls(**{name: value for name, value in common.items() if name in wanted}, **options)

    @classmethod
    def options(cls) -> dict[str, Any]:
        """The encoding's own keyword options (its constructor's other parameters) and their
        defaults."""
        parameters = inspect.signature(cls).parameters
        return {name: p.default for name, p in parameters.items() if name not in REGISTRY_ARGUMENTS}


class AbsolutePositional(nn.Module, RegistryBuilt, abc.ABC):
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


class SequentialPositional(AbsolutePositional):
    """Encodings generated one position after another: e^0 learned, e^{i+1} = step(e^i, i).

    Position i depends on every earlier one, so ``encoding(L, offset)`` unrolls
    ``offset + L`` steps; the loop cannot be parallelised. When nothing needs gradients
    (eval mode and autograd off, i.e. inference) the unrolled rows are cached and only
    extended, so incremental decoding costs one step per new position. The cache is
    dropped when any parameter changes (in-place updates bump a tensor's version).
    """

    def __init__(self) -> None:
        super().__init__()
        self._cache: Tensor | None = None
        self._cached_for: tuple[Any, ...] | None = None

    @abc.abstractmethod
    def initial(self) -> Tensor:
        """e^0, shape ``(E,)``."""

    @abc.abstractmethod
    def step(self, state: Tensor, index: int) -> Tensor:
        """e^{index + 1} ``(E,)`` from e^{index} ``(E,)``."""

    def encoding(self, length: int, offset: int = 0) -> Tensor:
        """The encodings of positions ``offset … offset + length - 1``, shape ``(L, E)``."""
        check_span(length, offset)
        end = offset + length
        if self.training or torch.is_grad_enabled():
            return self._unroll(end)[offset:end]
        key = self._parameter_versions()
        if self._cache is None or key != self._cached_for:
            self._cache, self._cached_for = self._unroll(end), key
        elif len(self._cache) < end:
            self._cache = torch.cat([self._cache, self._unroll(end, self._cache)])
        return self._cache[offset:end]

    def _unroll(self, end: int, done: Tensor | None = None) -> Tensor:
        """Rows ``len(done) … end - 1`` continuing from ``done[-1]`` (all from e^0 if None)."""
        if done is None:
            state = self.initial()
            rows, start = [state], 1
        else:
            state, rows, start = done[-1], [], len(done)
        for index in range(start, end):
            state = self.step(state, index - 1)
            rows.append(state)
        return torch.stack(rows) if rows else state.new_empty(0, state.shape[-1])

    def _parameter_versions(self) -> tuple[Any, ...]:
        return tuple(
            (id(param), param._version, param.device, param.dtype) for param in self.parameters()
        )


class RelativePositional(nn.Module, RegistryBuilt, abc.ABC):
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


def check_span(length: int, offset: int) -> None:
    """Reject a negative ``length`` or ``offset`` with a clear message."""
    if length < 0 or offset < 0:
        raise ValueError(f"length and offset must be >= 0, got length={length}, offset={offset}")


def check_channel_pairs(encoding: str, name: str, size: int, base: float) -> None:
    """Refuse, in one line, a ``size`` (field ``name``) that is not a positive even number
    (the channels of ``encoding`` come in pairs sharing one frequency) or a ``base`` ≤ 0."""
    if size <= 0 or size % 2:
        raise ValueError(f"{encoding} encoding needs an even {name}, got {size}")
    if base <= 0:
        raise ValueError(f"base must be positive, got {base}")


def head_dim_of(embed_dim: int, num_heads: int) -> int:
    """``embed_dim // num_heads``, refusing a split that leaves a remainder."""
    if num_heads <= 0 or embed_dim % num_heads:
        raise ValueError(f"embed_dim ({embed_dim}) must be divisible by num_heads ({num_heads})")
    return embed_dim // num_heads
