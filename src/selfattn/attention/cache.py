"""Key/value caches for incremental (autoregressive) decoding (lecture 001 §3, decoder).

An autoregressive decoder emits one token per step, and step t attends to every earlier
position. Recomputing the keys and values of positions 0 … t-1 at every step costs
O(t) projections per step; keeping them costs memory instead:

* a self-attention :class:`KVCache` grows by the new positions' keys and values each step;
* a cross-attention cache is *static*: the encoder output does not change while decoding,
  so its keys and values are projected once and reused.

Beam search keeps one cache row per hypothesis and reorders rows when hypotheses are
re-ranked (:meth:`KVCache.reorder`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import Tensor


@dataclass
class KVCache:
    """Projected keys and values of the positions seen so far.

    Attributes:
        key: ``(B, Hk, S, D)`` keys (after any rotary transform), or ``None`` when empty.
        value: ``(B, Hk, S, D)`` values, or ``None``.
        static: the keys and values are computed once and never extended (cross-attention
            to an encoder memory).
    """

    key: Tensor | None = None
    value: Tensor | None = None
    static: bool = False

    @property
    def length(self) -> int:
        """S, the number of cached positions."""
        return 0 if self.key is None else int(self.key.shape[2])

    def append(self, key: Tensor, value: Tensor) -> tuple[Tensor, Tensor]:
        """Add the new positions' ``(B, Hk, T, D)`` keys and values; return all of them."""
        if self.key is None or self.value is None:
            self.key, self.value = key, value
        elif self.static:
            raise RuntimeError("a static (cross-attention) cache cannot be extended")
        else:
            if key.shape[0] != self.key.shape[0]:
                raise ValueError(
                    f"cache holds a batch of {self.key.shape[0]}, new keys have {key.shape[0]}"
                )
            self.key = torch.cat([self.key, key], dim=2)
            self.value = torch.cat([self.value, value], dim=2)
        return self.key, self.value

    def reorder(self, index: Tensor) -> None:
        """Keep batch rows ``index`` (``(B',)`` long), e.g. the surviving beams."""
        if self.key is not None and self.value is not None:
            self.key = self.key.index_select(0, index)
            self.value = self.value.index_select(0, index)


@dataclass
class DecoderCache:
    """One self-attention and one cross-attention cache per decoder block application.

    Attributes:
        layers: ``(self_cache, cross_cache)`` per block application, created on first use.
        offset: positions decoded so far (the absolute position of the next input).
    """

    layers: list[tuple[KVCache, KVCache]] = field(default_factory=list)
    offset: int = 0

    def layer(self, index: int) -> tuple[KVCache, KVCache]:
        """The caches of block application ``index``, created empty on first use."""
        while len(self.layers) <= index:
            self.layers.append((KVCache(), KVCache(static=True)))
        return self.layers[index]

    def reorder(self, index: Tensor) -> None:
        """Keep batch rows ``index`` in every layer's caches."""
        for self_cache, cross_cache in self.layers:
            self_cache.reorder(index)
            cross_cache.reorder(index)
