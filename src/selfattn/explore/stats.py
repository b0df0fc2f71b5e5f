"""Per-head statistics that tell a local head from a global one (lecture 003: some heads
look at the neighbours, others across the whole input).

For one head's map α (``(T, S)``, each row a distribution over keys):

* mean attention distance: the mean over queries i of Σ_j α_ij · d(i, j), where d is the
  distance between positions: |i − j| along a sequence, the Euclidean distance between
  grid cells for an image's pixels or patches. Small: the head reads near its query.
* entropy: the mean over queries of −Σ_j α_ij ln α_ij (nats). 0: each query reads one
  key; ln S: it reads all keys evenly.

Both are computed in float64 from the maps the model returns with its weights.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import Tensor


def position_distances(
    length: int, *, grid: tuple[int, int] | None = None, offset: int = 0
) -> Tensor:
    """``(L, L)`` float64 distances between positions.

    Args:
        length: L, the positions of a self-attention map.
        grid: ``(rows, cols)`` when the positions after ``offset`` tile an image row-major:
            the distance is then Euclidean between cells.
        offset: leading positions outside the grid (a [CLS] vector): NaN rows and columns,
            so the statistic leaves them out.

    Raises:
        ValueError: the grid does not hold ``length - offset`` positions.
    """
    index = torch.arange(length - offset, dtype=torch.float64)
    if grid is None:
        where = index.unsqueeze(1)
    else:
        rows, cols = grid
        if rows * cols != length - offset:
            raise ValueError(
                f"a {rows} × {cols} grid holds {rows * cols} positions, the map has "
                f"{length - offset} after {offset} leading ones"
            )
        where = torch.stack([index // cols, index % cols], dim=1)
    inner = torch.cdist(where, where)
    out = torch.full((length, length), math.nan, dtype=torch.float64)
    out[offset:, offset:] = inner
    return out


def head_statistics(
    maps: Sequence[Tensor], distances: Tensor | None = None
) -> tuple[list[list[float]] | None, list[list[float]]]:
    """Mean attention distance and entropy of every head of every layer.

    Args:
        maps: per layer ``(H, T, S)`` attention weights.
        distances: ``(T, S)`` from :func:`position_distances`, or ``None`` (cross-attention,
            a graph's neighbours: no distance is given).

    Returns:
        ``(distance, entropy)``, each layers × heads; ``distance`` is ``None`` without
        ``distances``. Rows of a query that reads no key (all 0) count as entropy 0.
    """
    distance: list[list[float]] | None = None if distances is None else []
    entropy: list[list[float]] = []
    for layer in maps:
        alpha = layer.detach().to(torch.float64).cpu()
        logs = torch.where(alpha > 0, alpha.log(), torch.zeros_like(alpha))
        entropy.append((-(alpha * logs).sum(-1)).mean(-1).tolist())
        if distances is not None and distance is not None:
            valid = ~distances.isnan()  # (T, S): leading [CLS] rows/columns left out
            weighted = (alpha * distances.nan_to_num(0.0)).sum(-1)  # (H, T)
            rows = valid.any(-1)
            distance.append(weighted[:, rows].mean(-1).tolist())
    return distance, entropy
