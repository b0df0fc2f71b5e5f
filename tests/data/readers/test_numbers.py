"""Numbers enter through a user's files: a regression label or a feature that is nan,
±inf, or beyond float32's range (``1e39`` becomes inf when the model reads it) is refused
in one line naming the file and the line, row or array."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from selfattn.data import DataError, load_dataset
from selfattn.data.formats.numeric import read_npz, read_ts
from selfattn.data.readers.user_description import InputDescription
from selfattn.data.readers.user_vectors import read_vectors

pytestmark = pytest.mark.filterwarnings("error")  # no overflow warning before the refusal

NOT_FINITE = ["nan", "inf", "-inf", "1e39", "-1e39"]


@pytest.mark.parametrize("label", NOT_FINITE)
def test_a_regression_label_must_be_a_finite_float32(tmp_path: Path, label: str) -> None:
    path = tmp_path / "y.csv"
    path.write_text(f"1.5,a text\n{label},another\n", encoding="utf-8")
    with pytest.raises(DataError) as info:
        load_dataset(path, task="regression")
    assert str(info.value) == (
        f"{path}:2: a regression label must be a finite number of at most 3.4e+38 in "
        f"size, got {label!r}"
    )


def test_regression_labels_in_range_still_read(tmp_path: Path) -> None:
    path = tmp_path / "y.csv"
    path.write_text("3e38,a text\n-1e-45,another\n", encoding="utf-8")
    assert [e.label for e in load_dataset(path, task="regression").train] == ["3e38", "-1e-45"]


@pytest.mark.parametrize("value", [np.nan, np.inf, 1e39])
def test_npz_training_features_must_be_finite_float32(tmp_path: Path, value: float) -> None:
    features = np.ones((3, 2))
    features[1, 0] = value
    path = tmp_path / "x.npz"
    np.savez(path, features=features, lengths=np.array([1, 2]), labels=np.array([0, 1]))
    with pytest.raises(DataError, match=r"x\.npz: 'features' row 1 holds NaN or inf"):
        read_npz(path)


@pytest.mark.parametrize(
    ("array", "value"), [("features", 1e39), ("features", np.nan), ("edge_features", np.inf)]
)
def test_an_npz_input_must_be_finite_float32(tmp_path: Path, array: str, value: float) -> None:
    arrays = {
        "features": np.ones((3, 2)),
        "edges": np.array([[0, 1], [1, 2]]),
        "edge_features": np.ones((2, 1)),
    }
    arrays[array][0, 0] = value
    path = tmp_path / "g.npz"
    np.savez(path, **arrays)  # type: ignore[arg-type]
    description = InputDescription("graph", feature_dim=2, edge_dim=1)
    with pytest.raises(DataError, match=rf"g\.npz: '{array}' must hold .*finite numbers"):
        read_vectors(path, description, str(path))


@pytest.mark.parametrize("value", NOT_FINITE)
def test_ts_values_must_be_finite_float32(tmp_path: Path, value: str) -> None:
    path = tmp_path / "bad.ts"
    path.write_text(f"@dimensions 2\n@data\n1,2:3,4:a\n1,{value}:3,4:b\n", encoding="utf-8")
    with pytest.raises(DataError, match=rf"bad\.ts:4: dimension 0 holds {value}, "):
        read_ts(path)
