"""The convex-hull task of pointer networks (Vinyals, Fortunato & Jaitly, 2015).

Input: n points uniform in the unit square, features ``(n, 2)`` float32. Output: the
hull's vertices as indices into the input, so the output "vocabulary" is the input
itself and the output length (the number of hull vertices) is the model's to decide —
the lecture's third output type on vectors rather than text.

The target is made unique: counter-clockwise order, starting from the vertex with the
smallest index. Vinyals et al. report two numbers, both from :func:`hull_metrics`:
exact-match accuracy and area coverage (predicted polygon area ÷ true hull area, 0 for
an invalid polygon).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
from scipy.spatial import ConvexHull

from selfattn.data.fetch.sources import GeneratedSource
from selfattn.data.registry import Recipe, register
from selfattn.datatypes import DatasetSplits, Example

#: Examples per split of every ``convex-hull-N`` recipe.
SPLIT_SIZES = {"train": 20_000, "dev": 500, "test": 1_000}


def hull_target(points: np.ndarray) -> tuple[int, ...]:
    """Indices of the convex hull's vertices: counter-clockwise, smallest index first.

    Args:
        points: ``(n, 2)`` coordinates, n ≥ 3, not all on one line.

    Returns:
        The vertex indices (points inside the hull or on its edges are not vertices).
    """
    # scipy documents 2-D hull vertices as counter-clockwise; only the start is ours.
    vertices = [int(v) for v in ConvexHull(np.asarray(points, dtype=np.float64)).vertices]
    return _rotate_to_smallest(vertices)


def _rotate_to_smallest(indices: Sequence[int]) -> tuple[int, ...]:
    if not indices:
        return ()
    start = indices.index(min(indices))
    return tuple(indices[start:]) + tuple(indices[:start])


def generate_hull_examples(
    num_points: int, size: int, seed: int | Sequence[int], name: str = "hull"
) -> list[Example]:
    """``size`` random point sets with their hull targets (seq2seq, vector input).

    Args:
        num_points: n, the points per example.
        size: the number of examples.
        seed: anything :func:`numpy.random.default_rng` takes; the same seed gives the
            same examples on every machine.
        name: prefix of each example's ``source`` (``name[i]``).

    Returns:
        Examples with ``features`` ``(n, 2)`` float32 and ``label`` the hull's vertex
        indices as strings (``"0"`` … ``"n-1"``).
    """
    rng = np.random.default_rng(seed)
    points = rng.random((size, num_points, 2), dtype=np.float32)  # (size, n, 2)
    return [
        Example(None, points[i], tuple(str(v) for v in hull_target(points[i])), f"{name}[{i}]")
        for i in range(size)
    ]


def hull_builder(num_points: int) -> Callable[[Recipe, list[Path]], DatasetSplits]:
    """The builder of recipe ``convex-hull-{num_points}``.

    Each split has its own generator, seeded with ``[source seed, n, split number]``
    (train 0, dev 1, test 2), so the splits differ from each other and across n.
    """

    def build(recipe: Recipe, paths: list[Path]) -> DatasetSplits:
        assert isinstance(recipe.source, GeneratedSource)
        splits = [
            generate_hull_examples(
                num_points, size, [recipe.source.seed, num_points, number], f"{recipe.name}/{split}"
            )
            for number, (split, size) in enumerate(SPLIT_SIZES.items())
        ]
        return recipe.splits(*splits)

    return build


def hull_metrics(points: np.ndarray, predicted: Sequence[int]) -> tuple[bool, float]:
    """Exact match and area coverage of a predicted hull (Vinyals et al. 2015, §4.3).

    Args:
        points: ``(n, 2)`` input coordinates.
        predicted: predicted vertex indices, in the order the polygon is traced.

    Returns:
        ``(exact, coverage)``: ``exact`` is True when ``predicted`` is the target up to
        where it starts (counter-clockwise, as :func:`hull_target`); ``coverage`` is the
        area of the polygon traced by ``predicted`` ÷ the true hull's area (≤ 1; either
        orientation counts), 0.0 for an invalid polygon: fewer than 3 points, a repeated
        or out-of-range index, or edges that cross.
    """
    xy = np.asarray(points, dtype=np.float64)
    indices = [int(i) for i in predicted]
    exact = _rotate_to_smallest(indices) == hull_target(xy)
    valid = (
        len(indices) >= 3
        and len(set(indices)) == len(indices)
        and all(0 <= i < len(xy) for i in indices)
    )
    if not valid or _self_intersecting(xy[indices]):
        return exact, 0.0
    return exact, _polygon_area(xy[indices]) / ConvexHull(xy).volume  # 2-D volume = area


def _polygon_area(vertices: np.ndarray) -> float:
    """Shoelace formula for ``(k, 2)`` vertices in tracing order (either orientation)."""
    x, y = vertices[:, 0], vertices[:, 1]
    return 0.5 * abs(float(np.dot(x, np.roll(y, -1)) - np.dot(y, np.roll(x, -1))))


def _cross(o: np.ndarray, a: np.ndarray, b: np.ndarray) -> float:
    """z of (a − o) × (b − o): > 0 when o → a → b turns counter-clockwise."""
    return float((a[0] - o[0]) * (b[1] - o[1]) - (a[1] - o[1]) * (b[0] - o[0]))


def _on_segment(p: np.ndarray, a: np.ndarray, b: np.ndarray) -> bool:
    """Whether p, known to be collinear with a–b, lies within the segment's box."""
    return bool(min(a[0], b[0]) <= p[0] <= max(a[0], b[0])) and bool(
        min(a[1], b[1]) <= p[1] <= max(a[1], b[1])
    )


def _segments_meet(a: np.ndarray, b: np.ndarray, c: np.ndarray, d: np.ndarray) -> bool:
    """Whether the closed segments a–b and c–d share a point."""
    d1, d2 = _cross(c, d, a), _cross(c, d, b)
    d3, d4 = _cross(a, b, c), _cross(a, b, d)
    if d1 * d2 < 0 and d3 * d4 < 0:
        return True  # each segment's ends lie strictly on both sides of the other
    return (
        (d1 == 0 and _on_segment(a, c, d))
        or (d2 == 0 and _on_segment(b, c, d))
        or (d3 == 0 and _on_segment(c, a, b))
        or (d4 == 0 and _on_segment(d, a, b))
    )


def _self_intersecting(vertices: np.ndarray) -> bool:
    """Whether two non-adjacent edges of the closed polygon ``(k, 2)`` meet."""
    k = len(vertices)
    edges = [(vertices[i], vertices[(i + 1) % k]) for i in range(k)]
    for i in range(k):
        # Edge i shares a vertex with i - 1 and i + 1; every other pair must be apart.
        for j in range(i + 2, k - (1 if i == 0 else 0)):
            if _segments_meet(*edges[i], *edges[j]):
                return True
    return False


_HULL_SIZES = ", ".join(f"{size:,} {split}" for split, size in SPLIT_SIZES.items())

register(
    *(
        Recipe(
            name=f"convex-hull-{n}",
            task="seq2seq",
            input="vectors",
            description=(
                f"Convex hull (pointer networks, Vinyals et al. 2015): {n} points uniform "
                f"in the unit square → the indices of the hull's vertices, counter-"
                f"clockwise from the smallest index. Generated, {_HULL_SIZES}; each split "
                f"from its own generator seeded [0, {n}, split number]."
            ),
            source=GeneratedSource(seed=0),
            licence="generated data, no restrictions",
            build=hull_builder(n),
        )
        for n in (5, 10, 20)
    )
)
