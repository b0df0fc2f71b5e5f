"""The convex-hull (pointer network) recipes: targets, metrics, splits."""

from __future__ import annotations

import numpy as np
import pytest

from selfattn.data import RECIPES, Example, generate_hull_examples, hull_metrics, hull_target
from selfattn.data.recipes import hull


def cross(o: np.ndarray, a: np.ndarray, b: np.ndarray) -> float:
    return float((a[0] - o[0]) * (b[1] - o[1]) - (a[1] - o[1]) * (b[0] - o[0]))


def assert_is_ccw_hull(example: Example) -> None:
    """Every turn is counter-clockwise and every other point lies inside every edge."""
    assert example.features is not None and example.features.dtype == np.float32
    points = example.features.astype(np.float64)
    hull = [int(i) for i in example.label]
    assert len(hull) == len(set(hull)) >= 3 and hull[0] == min(hull)
    k = len(hull)
    for i in range(k):
        a, b, c = points[hull[i]], points[hull[(i + 1) % k]], points[hull[(i + 2) % k]]
        assert cross(a, b, c) > 0  # consecutive edges turn left
        # Strictly left of edge a → b: inside the hull (all points, hull ones excepted).
        for j in set(range(len(points))) - {hull[i], hull[(i + 1) % k]}:
            assert cross(a, b, points[j]) > 0


def test_square_with_interior_point() -> None:
    points = np.array([[0.5, 0.5], [1, 1], [0, 0], [1, 0], [0, 1]], dtype=np.float32)
    # Counter-clockwise: (0,0) → (1,0) → (1,1) → (0,1); rotated to start at index 1.
    assert hull_target(points) == (1, 4, 2, 3)


def test_generated_targets_are_the_ccw_hull() -> None:
    examples = generate_hull_examples(12, 200, seed=[7, 12, 0])
    for example in examples:
        assert_is_ccw_hull(example)
        assert example.features is not None and example.features.shape == (12, 2)
        assert all(label.isdigit() and int(label) < 12 for label in example.label)
    assert examples[0].source == "hull[0]"


def test_generation_is_deterministic_and_seed_dependent() -> None:
    first = generate_hull_examples(10, 20, seed=[0, 10, 0])
    again = generate_hull_examples(10, 20, seed=[0, 10, 0])
    other = generate_hull_examples(10, 20, seed=[0, 10, 1])
    assert all(np.array_equal(a.features, b.features) for a, b in zip(first, again, strict=True))
    assert [a.label for a in first] == [b.label for b in again]
    assert not np.array_equal(first[0].features, other[0].features)


def test_recipe_splits_sizes_and_independence(monkeypatch: pytest.MonkeyPatch) -> None:
    # Smaller splits keep this fast; the real sizes are checked in the slow test below.
    monkeypatch.setattr(hull, "SPLIT_SIZES", {"train": 300, "dev": 50, "test": 100})
    splits = RECIPES["convex-hull-5"].load()
    assert splits.task == "seq2seq" and splits.input == "vectors"
    assert (len(splits.train), len(splits.dev), len(splits.test)) == (300, 50, 100)
    assert splits.extra["source"] == "generated (seed 0)"
    assert splits.test[0].source == "convex-hull-5/test[0]"
    first = [s[0].features for s in (splits.train, splits.dev, splits.test)]
    assert first[0] is not None and first[0].shape == (5, 2)
    assert not np.array_equal(first[0], first[1]) and not np.array_equal(first[1], first[2])
    for example in splits.test[:50]:
        assert_is_ccw_hull(example)
    again = RECIPES["convex-hull-5"].load()
    assert np.array_equal(again.test[-1].features, splits.test[-1].features)


def test_hull_metrics() -> None:
    rng = np.random.default_rng(3)
    points = rng.random((20, 2))
    truth = list(hull_target(points))
    assert hull_metrics(points, truth) == (True, 1.0)
    # Any starting vertex is the same polygon; the opposite orientation is not an exact
    # match but covers the same area.
    assert hull_metrics(points, truth[2:] + truth[:2]) == (True, 1.0)
    exact, coverage = hull_metrics(points, truth[::-1])
    assert not exact and coverage == pytest.approx(1.0)
    exact, coverage = hull_metrics(points, truth[:-1])  # one vertex missing
    assert not exact and 0.0 < coverage < 1.0
    assert hull_metrics(points, [*truth, truth[0]]) == (False, 0.0)  # a repeated index
    assert hull_metrics(points, truth[:2]) == (False, 0.0)  # fewer than 3 points
    assert hull_metrics(points, [*truth[:-1], 99]) == (False, 0.0)  # out of range
    assert hull_metrics(points, []) == (False, 0.0)


def test_self_intersecting_prediction_covers_nothing() -> None:
    square = np.array([[0, 0], [1, 0], [1, 1], [0, 1]], dtype=np.float32)
    assert hull_metrics(square, [0, 1, 2, 3]) == (True, 1.0)
    assert hull_metrics(square, [0, 2, 1, 3]) == (False, 0.0)  # a bow tie
    # A triangle of the square is simple, covering half of it.
    assert hull_metrics(square, [0, 1, 2]) == (False, 0.5)


@pytest.mark.slow
@pytest.mark.parametrize("n", [5, 10, 20])
def test_real_hull_recipes(n: int) -> None:
    splits = RECIPES[f"convex-hull-{n}"].load()
    assert (len(splits.train), len(splits.dev), len(splits.test)) == (20_000, 500, 1_000)
    examples = splits.train + splits.dev + splits.test
    assert all(e.features is not None and e.features.shape == (n, 2) for e in examples)
    lengths = np.array([len(e.label) for e in examples])
    # The expected number of vertices grows like (8/3)·ln n (Rényi & Sulanke).
    assert lengths.min() >= 3 and lengths.max() <= n
    assert lengths.mean() == pytest.approx({5: 4.2, 10: 6.0, 20: 7.8}[n], abs=0.1)
    for example in splits.dev[:100]:
        assert_is_ccw_hull(example)
