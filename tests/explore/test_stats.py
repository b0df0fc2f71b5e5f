"""Per-head statistics of the explorer: mean attention distance and entropy."""

from __future__ import annotations

import math

import pytest
import torch

from selfattn.explore.stats import head_statistics, position_distances


def _softmax_maps(layers: int, heads: int, length: int, seed: int = 0) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    return [
        torch.randn(heads, length, length, generator=generator).softmax(-1) for _ in range(layers)
    ]


def test_statistics_follow_their_formulas() -> None:
    maps = _softmax_maps(2, 3, 5)
    distance, entropy = head_statistics(maps, position_distances(5))
    assert distance is not None
    for layer, alpha in enumerate(maps):
        for head in range(3):
            a = alpha[head].double()
            d = sum(a[i, j] * abs(i - j) for i in range(5) for j in range(5)) / 5
            h = -sum(a[i, j] * math.log(a[i, j]) for i in range(5) for j in range(5)) / 5
            assert distance[layer][head] == pytest.approx(float(d), abs=1e-12)
            assert entropy[layer][head] == pytest.approx(float(h), abs=1e-12)


def test_a_local_head_and_a_global_head_are_told_apart() -> None:
    length = 8
    local = torch.eye(length)  # each query reads itself
    uniform = torch.full((length, length), 1 / length)  # each reads everything evenly
    distance, entropy = head_statistics([torch.stack([local, uniform])], position_distances(8))
    assert distance is not None
    assert distance[0][0] == 0 and entropy[0][0] == 0
    assert entropy[0][1] == pytest.approx(math.log(length))
    expected = sum(abs(i - j) for i in range(length) for j in range(length)) / length**2
    assert distance[0][1] == pytest.approx(expected)


def test_image_distances_are_between_grid_cells_and_skip_a_leading_cls() -> None:
    distances = position_distances(7, grid=(2, 3), offset=1)
    assert distances[0].isnan().all() and distances[:, 0].isnan().all()
    # cells 0 (row 0, col 0) and 5 (row 1, col 2): sqrt(1 + 4)
    assert distances[1, 6] == pytest.approx(math.sqrt(5))
    assert distances[2, 5] == pytest.approx(1.0)  # (0, 1) and (1, 1)
    alpha = torch.zeros(1, 7, 7)
    alpha[0, :, 0] = 1.0  # everyone reads [CLS] only: no distance travelled on the grid
    distance, _ = head_statistics([alpha], distances)
    assert distance == [[0.0]]
    with pytest.raises(ValueError, match="a 2 × 3 grid holds 6 positions"):
        position_distances(8, grid=(2, 3), offset=1)


def test_cross_attention_has_entropy_but_no_distance() -> None:
    alpha = torch.rand(2, 3, 4).softmax(-1)
    distance, entropy = head_statistics([alpha], None)
    assert distance is None and len(entropy[0]) == 2
