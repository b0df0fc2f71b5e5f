"""Positional encodings for a 2-D grid of vectors: pixels or patches (lecture 000, §Image).

An image is a vector set (the lecture's 5×10×3 picture is 50 three-dimensional vectors),
and self-attention over a set ignores where each vector sat. These encodings put the
(row, column) of each vector back, for a ``rows × cols`` grid flattened row-major — the
order :mod:`selfattn.vision` produces (index = row · cols + col):

* :class:`Sinusoidal2D` — the sinusoid of Vaswani et al. (2017, §3.5) applied per axis:
  the first E/2 channels encode the row, the last E/2 the column (the "2-D sin-cos"
  embedding of MAE, He et al. 2022, and MoCo v3, Chen et al. 2021).
* :class:`Learned2D` — a learned row table plus a learned column table, summed (the
  factorised "2-D" variant compared in ViT, Dosovitskiy et al. 2021, App. D.4).
* :class:`Relative2DBias` — a learned per-head score bias indexed by the 2-D offset
  between query and key (Swin, Liu et al. 2021; the relative encoding of Cordonnier et al.
  2020, §3), passed to attention as an additive mask.

The absolute ones share :class:`GridPositional`; its ``forward(x, rows, cols, has_cls)``
needs the grid, so these are not :class:`~selfattn.positional.base.AbsolutePositional`
(whose ``forward(x, offset)`` sees only a 1-D sequence).
"""

from __future__ import annotations

import abc
from typing import Literal, get_args

import torch
from torch import Tensor, nn

from selfattn.positional.sinusoidal import sinusoidal_table

Extrapolation = Literal["error", "clamp"]


class GridPositional(nn.Module, abc.ABC):
    """Adds an encoding of (row, column) to every vector of a row-major grid.

    Args:
        embed_dim: E.
        max_rows: rows the encoding is built (or precomputed) for.
        max_cols: columns likewise.
    """

    def __init__(self, embed_dim: int, max_rows: int, max_cols: int) -> None:
        super().__init__()
        if embed_dim <= 0 or max_rows <= 0 or max_cols <= 0:
            raise ValueError(
                f"{type(self).__name__}: embed_dim, max_rows and max_cols must be positive, "
                f"got {embed_dim}, {max_rows}, {max_cols}"
            )
        self.embed_dim, self.max_rows, self.max_cols = embed_dim, max_rows, max_cols

    @classmethod
    def build(cls, *, embed_dim: int, max_rows: int, max_cols: int) -> GridPositional:
        """Registry constructor: every grid encoding takes the same three arguments."""
        return cls(embed_dim, max_rows, max_cols)

    @abc.abstractmethod
    def encoding(self, rows: int, cols: int) -> Tensor:
        """The encoding of every cell, row-major: ``(rows · cols, E)``."""

    def forward(self, x: Tensor, rows: int, cols: int, has_cls: bool = False) -> Tensor:
        """Args:
            x: ``(B, rows · cols, E)``, or ``(B, 1 + rows · cols, E)`` with a class token
                first (ViT). The class token is left as it is: it is itself a learned
                vector, so a learned position for it would add nothing.
            rows: grid height.
            cols: grid width.
            has_cls: ``x[:, 0]`` is a class token.

        Returns:
            ``x`` plus the encoding of each cell's (row, column).
        """
        name = type(self).__name__
        if x.dim() != 3 or x.shape[-1] != self.embed_dim:
            raise ValueError(
                f"{name} expects (B, L, {self.embed_dim}) input, got shape {tuple(x.shape)}"
            )
        if rows <= 0 or cols <= 0:
            raise ValueError(f"{name}: rows and cols must be positive, got {rows}×{cols}")
        extra = int(has_cls)
        if x.shape[1] != rows * cols + extra:
            cls_note = " + 1 class token" if has_cls else ""
            raise ValueError(
                f"{name}: a {rows}×{cols} grid{cls_note} has {rows * cols + extra} vectors "
                f"but the input has {x.shape[1]}"
            )
        pos = self.encoding(rows, cols).to(dtype=x.dtype, device=x.device)
        if has_cls:
            pos = torch.cat([pos.new_zeros(1, self.embed_dim), pos])
        return x + pos

    def extra_repr(self) -> str:
        return f"embed_dim={self.embed_dim}, max_rows={self.max_rows}, max_cols={self.max_cols}"


class Sinusoidal2D(GridPositional):
    """Fixed 2-D sinusoid: channels ``[0, E/2)`` encode the row, ``[E/2, E)`` the column.

    Each half is the 1-D table of :func:`~selfattn.positional.sinusoidal.sinusoidal_table`
    with E/2 channels, so the row half is identical along a row and a shift of k rows
    rotates it the same way wherever the cell is. Like the 1-D sinusoid it has no size
    limit: ``max_rows`` × ``max_cols`` is only what is precomputed.

    Args:
        embed_dim: E, divisible by 4 (two axes, each in sin/cos pairs).
        max_rows: rows precomputed into a buffer.
        max_cols: columns precomputed into a buffer.
        base: the wavelength scale (10000 in Vaswani et al.).
    """

    def __init__(
        self, embed_dim: int, max_rows: int = 64, max_cols: int = 64, base: float = 10000.0
    ) -> None:
        super().__init__(embed_dim, max_rows, max_cols)
        if embed_dim % 4:
            raise ValueError(
                f"Sinusoidal2D needs embed_dim divisible by 4 (half per axis, sin/cos pairs), "
                f"got {embed_dim}"
            )
        if base <= 0:
            raise ValueError(f"base must be positive, got {base}")
        self.base = base
        self.row_table: Tensor
        self.col_table: Tensor
        self.register_buffer("row_table", self._axis(max_rows), persistent=False)
        self.register_buffer("col_table", self._axis(max_cols), persistent=False)

    def _axis(self, length: int, device: torch.device | None = None) -> Tensor:
        return sinusoidal_table(length, self.embed_dim // 2, base=self.base, device=device)

    def encoding(self, rows: int, cols: int) -> Tensor:
        """``(rows · cols, E)``: ``[PE_row(r); PE_col(c)]`` for cell (r, c), row-major."""
        device = self.row_table.device
        row = self.row_table[:rows] if rows <= self.max_rows else self._axis(rows, device)
        col = self.col_table[:cols] if cols <= self.max_cols else self._axis(cols, device)
        half = self.embed_dim // 2
        return torch.cat(
            [
                row[:, None, :].expand(rows, cols, half),  # same row vector along a row
                col[None, :, :].expand(rows, cols, half),  # same column vector down a column
            ],
            dim=-1,
        ).reshape(rows * cols, self.embed_dim)

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, base={self.base}"


class Learned2D(GridPositional):
    """Learned ``row[r] + col[c]``: a ``(max_rows, E)`` and a ``(max_cols, E)`` table.

    Factorised rather than one ``(max_rows · max_cols, E)`` table because a full table
    indexed row-major only fits one grid width: a 4×4 image inside an 8×8 table would take
    rows 0–15, i.e. the first two table rows. With one table per axis every grid up to the
    maximum uses the same vectors for the same (row, column), at (rows + cols)·E parameters
    instead of rows·cols·E. Summing full-width vectors includes ViT's variant (concatenated
    E/2 halves) as a special case.

    Args:
        embed_dim: E.
        max_rows: rows of the row table; taller grids are refused.
        max_cols: rows of the column table; wider grids are refused.
    """

    def __init__(self, embed_dim: int, max_rows: int = 64, max_cols: int = 64) -> None:
        super().__init__(embed_dim, max_rows, max_cols)
        self.row = nn.Parameter(0.02 * torch.randn(max_rows, embed_dim))  # ViT/BERT scale
        self.col = nn.Parameter(0.02 * torch.randn(max_cols, embed_dim))

    def encoding(self, rows: int, cols: int) -> Tensor:
        """``(rows · cols, E)``: ``row[r] + col[c]`` for cell (r, c), row-major.

        Raises:
            ValueError: the grid is larger than the tables.
        """
        if rows > self.max_rows or cols > self.max_cols:
            raise ValueError(
                f"Learned2D: a {rows}×{cols} grid does not fit the learned tables of "
                f"{self.max_rows}×{self.max_cols} (use larger max_rows/max_cols, bigger "
                "patches, or Sinusoidal2D)"
            )
        return (self.row[:rows, None, :] + self.col[None, :cols, :]).reshape(rows * cols, -1)


class Relative2DBias(nn.Module):
    """A learned score bias per head for each 2-D offset from query cell to key cell.

    Entry ``table[h, Δr + max_rows − 1, Δc + max_cols − 1]`` is added to head h's score
    between the query at (r, c) and the key at (r + Δr, c + Δc); a ``(2·max_rows − 1) ×
    (2·max_cols − 1)`` table covers every offset inside a ``max_rows × max_cols`` grid.
    The result is an additive ``(H, L, L)`` mask for
    :class:`~selfattn.attention.MultiHeadAttention` (``mask=``); ``-inf`` entries forbid
    an offset, so the table can also describe a hard receptive field.

    Args:
        num_heads: H.
        max_rows: grid height the table covers.
        max_cols: grid width the table covers.
        extrapolation: for larger grids, ``"error"`` refuses them; ``"clamp"`` gives an
            offset beyond the table the bias of the nearest edge entry (the clipping of
            Shaw et al. 2018).
    """

    def __init__(
        self,
        num_heads: int,
        max_rows: int,
        max_cols: int,
        extrapolation: Extrapolation = "error",
    ) -> None:
        super().__init__()
        if num_heads <= 0 or max_rows <= 0 or max_cols <= 0:
            raise ValueError(
                "Relative2DBias: num_heads, max_rows and max_cols must be positive, got "
                f"{num_heads}, {max_rows}, {max_cols}"
            )
        if extrapolation not in get_args(Extrapolation):
            raise ValueError(
                f"extrapolation must be one of {get_args(Extrapolation)}, got {extrapolation!r}"
            )
        self.num_heads, self.max_rows, self.max_cols = num_heads, max_rows, max_cols
        self.extrapolation = extrapolation
        self.table = nn.Parameter(0.02 * torch.randn(num_heads, 2 * max_rows - 1, 2 * max_cols - 1))

    def offset_index(self, rows: int, cols: int) -> tuple[Tensor, Tensor]:
        """Table coordinates of every (query, key) pair of a row-major grid.

        Returns:
            Two ``(L, L)`` long tensors, L = rows · cols: ``Δr + max_rows − 1`` and
            ``Δc + max_cols − 1`` with Δ = key cell − query cell (clamped if allowed).
        """
        if (rows > self.max_rows or cols > self.max_cols) and self.extrapolation == "error":
            raise ValueError(
                f"Relative2DBias: a {rows}×{cols} grid has offsets beyond the table built for "
                f"{self.max_rows}×{self.max_cols} (use larger max_rows/max_cols or "
                "extrapolation='clamp')"
            )
        cell = torch.arange(rows * cols, device=self.table.device)
        row, col = cell // cols, cell % cols
        d_row = (row[None, :] - row[:, None]).clamp(-self.max_rows + 1, self.max_rows - 1)
        d_col = (col[None, :] - col[:, None]).clamp(-self.max_cols + 1, self.max_cols - 1)
        return d_row + self.max_rows - 1, d_col + self.max_cols - 1

    def forward(self, rows: int, cols: int) -> Tensor:
        """The bias of every head for a ``rows × cols`` grid: ``(H, L, L)``, L = rows·cols."""
        d_row, d_col = self.offset_index(rows, cols)
        return self.table[:, d_row, d_col]

    def extra_repr(self) -> str:
        return (
            f"num_heads={self.num_heads}, max_rows={self.max_rows}, max_cols={self.max_cols}, "
            f"extrapolation={self.extrapolation!r}"
        )


__all__ = ["GridPositional", "Learned2D", "Relative2DBias", "Sinusoidal2D"]
