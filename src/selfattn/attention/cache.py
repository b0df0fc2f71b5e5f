"""Key/value caches for incremental (autoregressive) decoding (lecture 001 §3, decoder).

An autoregressive decoder emits one token per step, and step t attends to every earlier
position. Recomputing the keys and values of positions 0 … t-1 at every step costs
O(t) projections per step; keeping them costs memory instead:

* a self-attention :class:`KVCache` receives the new positions' keys and values each
  step. Given a ``capacity`` it is *preallocated*: buffers for ``capacity`` positions are
  allocated on the first step and written in place, and attention reads the filled prefix
  (a view), so a step copies only its own keys and values. Without one it grows by
  concatenation, which copies the whole prefix every step;
* a cross-attention cache is *static*: the encoder output does not change while decoding,
  so its keys and values are projected once and reused.

Beam search keeps one cache row per hypothesis and reorders rows when hypotheses are
re-ranked (:meth:`KVCache.reorder`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

import torch
from torch import Tensor

from selfattn.attention.packed_linear import PackedLinears


@dataclass
class KVCache:
    """Projected keys and values of the positions seen so far.

    Attributes:
        key: ``(B, Hk, S, D)`` keys of the S cached positions (after any rotary
            transform), or ``None`` when empty; a view of the buffer when preallocated.
        value: ``(B, Hk, S, D)`` values, or ``None``.
        static: the keys and values are computed once and never extended (cross-attention
            to an encoder memory).
        capacity: preallocate buffers for this many positions on the first append (and
            refuse more); ``None``: grow by concatenation.
        alignment: a cross-attention that reads its previous step's weights (location-
            aware or forward attention, :mod:`selfattn.attention.alignment`): ``(B, H, S)``
            the last step's alignment, else ``None``.
        linears: the decode's packed weights (:class:`PackedLinears`, shared by every cache
            of one :class:`DecoderCache`), through which the attention and the block's
            feed-forward layers project a step's rows; ``None``: plain ``nn.Linear``.
        folded: a static cache whose ``key`` and ``value`` hold the cross-attention's keys
            and values multiplied into its query and output projections (the lean
            decoding step's, :mod:`selfattn.decoding.lean`): ``key`` ``(B, E + 1, H·S)``,
            ``value`` ``(B, H·S, E)``; rows move as any cache's.
    """

    key: Tensor | None = None
    value: Tensor | None = None
    static: bool = False
    capacity: int | None = None
    alignment: Tensor | None = None
    linears: PackedLinears | None = field(default=None, repr=False)
    folded: bool = False
    _buffers: tuple[Tensor, Tensor] | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self.capacity is not None and self.capacity < 1:
            raise ValueError(f"capacity must be at least 1 position, got {self.capacity}")

    @property
    def length(self) -> int:
        """S, the number of cached positions."""
        return 0 if self.key is None else int(self.key.shape[2])

    def append(self, key: Tensor, value: Tensor) -> tuple[Tensor, Tensor]:
        """Add the new positions' ``(B, Hk, T, D)`` keys and values; return all of them.

        Raises:
            RuntimeError: a static cache is extended, or a preallocated one past its
                capacity.
            ValueError: the batch size differs from the cached one.
        """
        if self.key is not None and self.static:
            raise RuntimeError("a static (cross-attention) cache cannot be extended")
        if self.key is not None and key.shape[0] != self.key.shape[0]:
            raise ValueError(
                f"cache holds a batch of {self.key.shape[0]}, new keys have {key.shape[0]}"
            )
        if self.static:  # contiguous once: every later step reads them
            self.key, self.value = key.contiguous(), value.contiguous()
            return self.key, self.value
        if self.capacity is None:
            if self.key is None or self.value is None:
                self.key, self.value = key, value
            else:
                self.key = torch.cat([self.key, key], dim=2)
                self.value = torch.cat([self.value, value], dim=2)
            return self.key, self.value
        return self._write(key, value)

    def _write(self, key: Tensor, value: Tensor) -> tuple[Tensor, Tensor]:
        """Preallocated :meth:`append`: copy into the buffers, view the filled prefix."""
        assert self.capacity is not None
        start, end = self.length, self.length + key.shape[2]
        if end > self.capacity:
            raise RuntimeError(
                f"the KV cache is full: it holds {self.capacity} positions, {start} are "
                f"cached and {key.shape[2]} more do not fit"
            )
        if self._buffers is None:
            shape = (*key.shape[:2], self.capacity, key.shape[3])
            self._buffers = (key.new_empty(shape), value.new_empty((*shape[:3], value.shape[3])))
        key_buffer, value_buffer = self._buffers
        # narrow, not [:, :, start:end]: a step is a few small copies, and indexing with
        # slices costs more than the copy itself.
        key_buffer.narrow(2, start, end - start).copy_(key)
        value_buffer.narrow(2, start, end - start).copy_(value)
        self.key, self.value = key_buffer.narrow(2, 0, end), value_buffer.narrow(2, 0, end)
        return self.key, self.value

    def write(self, position: int, key: Tensor, value: Tensor) -> tuple[Tensor, Tensor]:
        """:meth:`append` of one step's ``(B, Hk, 1, D)`` keys and values at ``position``,
        the number of positions cached, for a preallocated cache whose buffers exist and
        have room (the caller made those checks once for the step): two copies and two
        views, none of :meth:`append`'s checks."""
        key_buffer, value_buffer = self._buffers  # type: ignore[misc]
        key_buffer.narrow(2, position, 1).copy_(key)
        value_buffer.narrow(2, position, 1).copy_(value)
        self.key = key_buffer.narrow(2, 0, position + 1)
        self.value = value_buffer.narrow(2, 0, position + 1)
        return self.key, self.value

    @property
    def preallocated(self) -> bool:
        """Whether the buffers of a preallocated cache exist (after its first append)."""
        return self._buffers is not None

    def reorder(self, index: Tensor, moved: RowMoves | None = None) -> None:
        """Keep batch rows ``index`` (``(B',)`` long), e.g. the surviving beams.

        ``moved``: the rows that change (:meth:`RowMoves.of`), when the caller found them
        once for several caches of the same rows.
        """
        self.reorder_alignment(index)
        if self._buffers is not None:
            end = self.length
            if _in_place(self._buffers[0], index):
                moved = RowMoves.of(index) if moved is None else moved
                if moved.any:  # the views of the filled prefix stay what they were
                    for buffer in self._buffers:
                        moved.apply(buffer.narrow(2, 0, end))
                return
            self._buffers = (
                _select_rows(self._buffers[0], index, end),
                _select_rows(self._buffers[1], index, end),
            )
            self.key = self._buffers[0].narrow(2, 0, end)
            self.value = self._buffers[1].narrow(2, 0, end)
        elif self.key is not None and self.value is not None:
            self.key = self.key.index_select(0, index)
            self.value = self.value.index_select(0, index)

    def reorder_alignment(self, index: Tensor) -> None:
        """Keep rows ``index`` of :attr:`alignment` only: beams re-ranked within their
        example share the memory's keys and values but each has its own alignment."""
        if self.alignment is not None:
            self.alignment = self.alignment.index_select(0, index)


def _in_place(buffer: Tensor, index: Tensor) -> bool:
    """Whether a reorder to rows ``index`` can rewrite ``buffer`` in place: on the CPU, as
    many rows kept as there are, and no autograd graph through the buffer.

    On the CPU a new buffer per reorder is a fresh allocation of the whole capacity (pages
    the kernel maps and zeroes, which dominated batched beam search: benchmarks/README.md),
    and finding the rows that move costs no device synchronisation.
    """
    grad = buffer.requires_grad and torch.is_grad_enabled()
    return buffer.device.type == "cpu" and index.shape[0] == buffer.shape[0] and not grad


class RowMoves(NamedTuple):
    """What a reorder to rows ``index`` rewrites in place: the rows i where
    ``index[i] != i``, and the rows they take, ``index[rows]``."""

    rows: Tensor
    sources: Tensor
    any: bool

    @classmethod
    def of(cls, index: Tensor) -> RowMoves:
        positions = torch.arange(index.shape[0], device=index.device)
        rows = (index != positions).nonzero().squeeze(1)
        return cls(rows, index[rows], bool(rows.numel()))

    def apply(self, prefix: Tensor) -> None:
        """Make row i of ``prefix`` ``(B, …)`` hold what row ``index[i]`` held, copying
        only the moved rows, those that change (most beams keep their own history: 71–85 %
        of rows in ``benchmarks/kv_cache.py``'s beam search); the moved rows are read
        before any is written, so a row may be both read and overwritten."""
        if self.any:
            prefix.index_copy_(0, self.rows, prefix.index_select(0, self.sources))


def _select_rows(buffer: Tensor, index: Tensor, length: int) -> Tensor:
    """A new buffer holding rows ``index`` of ``buffer`` ``(B, Hk, capacity, D)``, of which
    only the first ``length`` positions are copied: the rest holds nothing yet (beam
    search reorders every step, and the filled part is on average half the buffer).
    Under autograd (``out=`` is not differentiable) the whole buffer is selected."""
    if buffer.requires_grad and torch.is_grad_enabled():
        return buffer.index_select(0, index)
    out = buffer.new_empty((index.shape[0], *buffer.shape[1:]))
    torch.index_select(buffer.narrow(2, 0, length), 0, index, out=out.narrow(2, 0, length))
    return out


@dataclass
class DecoderCache:
    """One self-attention and one cross-attention cache per decoder block application.

    Attributes:
        capacity: positions the self-attention caches are preallocated for (the decoder
            inputs of a whole decode: BOS and every token but the last); ``None``: they
            grow by concatenation.
        layers: ``(self_cache, cross_cache)`` per block application, created on first use.
        offset: positions decoded so far (the absolute position of the next input).
        memory_padding: the ``(B, S)`` source padding the cross-attention masks, as
            :meth:`memory_mask` first found it (``None``: no source has padding).
        vocab_weight: ``(E, V)`` the model's vocabulary projection laid out for a step's
            few rows, made on the first step (the weights do not change while decoding;
            see ``Seq2SeqTransformer._vocab_logits``), else ``None``; used where
            ``linears`` cannot pack.
        linears: the decoder's weights (attention projections, feed-forward layers and
            the vocabulary projection), packed on first use for a step's few rows
            (:mod:`selfattn.attention.packed_linear`); every layer's caches share it.
        group: the decoder rows come in groups of this many consecutive rows that read
            one source (beam search's beams of one example), and the cross-attention
            caches and ``memory_padding`` hold one row per group. Only a step that
            attends per group writes them so (``selfattn.decoding.lean``); 1 otherwise.
    """

    capacity: int | None = None
    layers: list[tuple[KVCache, KVCache]] = field(default_factory=list)
    offset: int = 0
    memory_padding: Tensor | None = None
    vocab_weight: Tensor | None = field(default=None, repr=False)
    linears: PackedLinears = field(default_factory=PackedLinears, repr=False)
    group: int = 1
    _slab: Tensor | None = field(default=None, repr=False)

    def allocate(self, num_layers: int, like: Tensor) -> None:
        """Preallocate the self-attention caches of ``num_layers`` blocks, for keys and
        values like ``like`` ``(B, Hk, 1, D)``, as views of one buffer ``(B, 2·layers, Hk,
        capacity, D)``: a beam reorder in place then moves a row's keys and values of every
        layer by one copy (:meth:`reorder`), not two per layer. Each layer's buffers are
        laid out as :meth:`KVCache.append` would make them, only further apart."""
        if self.capacity is None:
            raise ValueError("allocate needs a capacity")
        rows, heads, _, dim = like.shape
        self._slab = like.new_empty((rows, 2 * num_layers, heads, self.capacity, dim))
        for index in range(num_layers):
            own, _ = self.layer(index)
            own._buffers = (self._slab[:, 2 * index], self._slab[:, 2 * index + 1])

    def layer(self, index: int) -> tuple[KVCache, KVCache]:
        """The caches of block application ``index``, created empty on first use."""
        while len(self.layers) <= index:
            self.layers.append(
                (
                    KVCache(capacity=self.capacity, linears=self.linears),
                    KVCache(static=True, linears=self.linears),
                )
            )
        return self.layers[index]

    def memory_mask(self, padding: Tensor) -> Tensor | None:
        """The key padding mask of the cross-attention: ``padding`` ``(B, S)``, or ``None``
        when no source has padding (nothing to mask, so no mask work in any later step).

        Decided on the first step (one device sync) and kept, as the cross-attention's keys
        and values are.
        """
        if self.offset == 0:
            self.memory_padding = padding if bool(padding.any()) else None
        return self.memory_padding

    def reorder(self, index: Tensor, *, memory: bool = True, moved: RowMoves | None = None) -> None:
        """Keep batch rows ``index`` in every layer's caches.

        Args:
            index: ``(B',)`` long, the rows to keep (repeated, reordered or dropped).
            memory: also move the cross-attention caches. False when every kept row reads
                the source of the row it replaces (beams re-ranked within their example),
                so the memory's rows are already right. With ``group`` > 1, ``index`` keeps
                groups whole: the rows of new group j all come from one old group.
            moved: the rows of ``index`` that change (:class:`RowMoves`), when the caller
                knows them already (beam search places its beams so: no search for them).
        """
        # Found once for every layer (each self-attention cache holds the same rows).
        if moved is None and index.device.type == "cpu":
            moved = RowMoves.of(index)
        slab = self._slab
        if slab is not None and moved is not None and not memory and _in_place(slab, index):
            moved.apply(slab.narrow(3, 0, self.layers[0][0].length))  # every layer at once
            for _, cross_cache in self.layers:
                cross_cache.reorder_alignment(index)
            return
        self._slab = None  # the layers' buffers may be rewritten apart from here on
        if not memory:
            for self_cache, cross_cache in self.layers:
                self_cache.reorder(index, moved)
                cross_cache.reorder_alignment(index)
            return
        # Rows of the cross-attention caches: one per group.
        sources = index if self.group == 1 else index[:: self.group] // self.group
        for self_cache, cross_cache in self.layers:
            self_cache.reorder(index, moved)
            cross_cache.reorder(sources)
        if self.memory_padding is not None:
            self.memory_padding = self.memory_padding.index_select(0, sources)
