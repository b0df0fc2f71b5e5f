"""2-D positional encodings of a row-major grid: shapes, structure, errors."""

from __future__ import annotations

import pytest
import torch

from selfattn.positional.grid import GridPositional, Learned2D, Relative2DBias, Sinusoidal2D
from selfattn.positional.sinusoidal import sinusoidal_table

E = 16
GRID_CLASSES: list[type[GridPositional]] = [Sinusoidal2D, Learned2D]


@pytest.mark.parametrize("cls", GRID_CLASSES)
@pytest.mark.parametrize("has_cls", [False, True])
def test_adds_one_encoding_per_cell(cls: type[GridPositional], has_cls: bool) -> None:
    pos = cls.build(embed_dim=E, max_rows=6, max_cols=8)
    rows, cols = 3, 5
    x = torch.randn(2, rows * cols + has_cls, E)
    out = pos(x, rows, cols, has_cls=has_cls)
    assert out.shape == x.shape
    table = pos.encoding(rows, cols)
    assert table.shape == (rows * cols, E)
    torch.testing.assert_close(out[:, int(has_cls) :], x[:, int(has_cls) :] + table)
    if has_cls:
        torch.testing.assert_close(out[:, 0], x[:, 0])  # the class token is left alone


@pytest.mark.parametrize("cls", GRID_CLASSES)
def test_distinct_cells_get_distinct_encodings(cls: type[GridPositional]) -> None:
    table = cls(E, 6, 8).encoding(6, 8)
    distances = torch.cdist(table, table)
    off_diagonal = distances[~torch.eye(48, dtype=torch.bool)]
    assert off_diagonal.min() > 1e-3


@pytest.mark.parametrize("cls", GRID_CLASSES)
def test_same_cell_same_vector_whatever_the_grid(cls: type[GridPositional]) -> None:
    pos = cls(E, 6, 8)
    big, small = pos.encoding(6, 8).reshape(6, 8, E), pos.encoding(2, 3).reshape(2, 3, E)
    torch.testing.assert_close(small, big[:2, :3])


def test_sinusoidal_halves_encode_row_and_column() -> None:
    rows, cols, half = 4, 6, E // 2
    table = Sinusoidal2D(E, 8, 8).encoding(rows, cols).reshape(rows, cols, E)
    row_half, col_half = table[..., :half], table[..., half:]
    # The row half depends only on the row, the column half only on the column ...
    torch.testing.assert_close(row_half, row_half[:, :1].expand(rows, cols, half))
    torch.testing.assert_close(col_half, col_half[:1].expand(rows, cols, half))
    # ... and each is the 1-D sinusoid with E/2 channels.
    torch.testing.assert_close(row_half[:, 0], sinusoidal_table(rows, half))
    torch.testing.assert_close(col_half[0], sinusoidal_table(cols, half))


def test_sinusoidal_shift_is_the_same_rotation_everywhere() -> None:
    """Moving k rows down rotates each (sin, cos) pair of the row half by a fixed angle."""
    half = E // 2
    table = Sinusoidal2D(E, 8, 8).encoding(8, 8).reshape(8, 8, E).double()
    pairs = table[..., :half].unflatten(-1, (half // 2, 2))  # (rows, cols, pairs, [sin, cos])
    angle = torch.atan2(pairs[..., 0], pairs[..., 1])
    step = torch.remainder(angle[2:] - angle[:-2], 2 * torch.pi)  # shift by k = 2 rows
    torch.testing.assert_close(step, step[:1, :1].expand_as(step), atol=1e-5, rtol=0)


def test_sinusoidal_extends_past_its_cache() -> None:
    pos = Sinusoidal2D(E, 2, 2)
    torch.testing.assert_close(pos.encoding(5, 3), Sinusoidal2D(E, 8, 8).encoding(5, 3))


def test_learned_is_row_plus_column() -> None:
    pos = Learned2D(E, 4, 5)
    table = pos.encoding(4, 5).reshape(4, 5, E)
    torch.testing.assert_close(table, pos.row[:, None] + pos.col[None, :])
    # Moving down a row adds the same vector in every column.
    step = table[1:] - table[:-1]
    torch.testing.assert_close(step, step[:, :1].expand_as(step))
    assert table.requires_grad


def test_errors() -> None:
    with pytest.raises(ValueError, match="divisible by 4"):
        Sinusoidal2D(18, 4, 4)
    with pytest.raises(ValueError, match=r"5×4 grid does not fit the learned tables of 4×4"):
        Learned2D(E, 4, 4).encoding(5, 4)
    pos = Sinusoidal2D(E, 4, 4)
    with pytest.raises(ValueError, match=r"3×4 grid \+ 1 class token has 13 vectors .* 12"):
        pos(torch.randn(1, 12, E), 3, 4, has_cls=True)
    with pytest.raises(ValueError, match="3×4 grid has 12 vectors but the input has 11"):
        pos(torch.randn(1, 11, E), 3, 4)
    with pytest.raises(ValueError, match=r"expects \(B, L, 16\) input"):
        pos(torch.randn(1, 12, E + 4), 3, 4)


def test_relative_bias_depends_only_on_the_offset() -> None:
    bias = Relative2DBias(2, 3, 4)
    full = bias(3, 4).reshape(2, 3, 4, 3, 4)  # (head, query row, query col, key row, key col)
    for qr, qc, kr, kc in [(0, 0, 2, 3), (1, 1, 0, 2), (2, 3, 2, 3)]:
        expected = bias.table[:, kr - qr + 2, kc - qc + 3]
        torch.testing.assert_close(full[:, qr, qc, kr, kc], expected)
    # Same offset, different place: same bias.
    torch.testing.assert_close(full[:, 0, 0, 1, 1], full[:, 1, 2, 2, 3])


def test_relative_bias_refuses_or_clamps_large_grids() -> None:
    with pytest.raises(ValueError, match="extrapolation='clamp'"):
        Relative2DBias(1, 2, 2)(3, 2)
    clamped = Relative2DBias(1, 2, 2, extrapolation="clamp")
    far = clamped(4, 1)[0, 0, 3]  # offset (+3, 0) → the table's edge (+1, 0)
    torch.testing.assert_close(far, clamped.table[0, 2, 1])
