"""A user's ``.npz`` read as one example, for any model of vector input.

The arrays are those a recipe's example holds: ``features`` ``(L, F)``; graph models also
``edges`` ``(E, 2)`` and, where they have them, ``edge_features`` ``(E, D_e)``. A training
file of one vector set (:func:`~selfattn.data.formats.numeric.read_npz`: ``features``,
``lengths``, ``labels``) reads too, through the same loader: no pickles, one-line errors.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from selfattn.data.formats.numeric import FLOAT32_RANGE, as_float32, npz_arrays
from selfattn.data.readers.user_description import InputDescription, check_width
from selfattn.datatypes import DataError, Example
from selfattn.specials import NO_LABEL


def read_vectors(path: Path, description: InputDescription, source: str) -> Example:
    """The ``.npz`` file's example, checked against what the model reads.

    Returns:
        An unlabelled example of ``features`` ``(L, F)`` float32 (an image model's
        ``(H·W, C)`` pixels), with ``edges`` and ``edge_features`` for a graph model.

    Raises:
        DataError: one line naming the file and the array that is missing or malformed.
    """
    arrays = npz_arrays(path)
    features = arrays.get("features")
    if "lengths" in arrays and arrays["lengths"].size != 1:
        raise DataError(f"{path}: holds {arrays['lengths'].size} vector sets; give one")
    if features is None or features.ndim != 2 or not np.issubdtype(features.dtype, np.number):
        raise DataError(f"{path}: needs a numeric 'features' array (L, F); has {sorted(arrays)}")
    # Cast first: a number beyond float32's range (1e39) is inf to the model.
    if len(features) == 0 or not np.isfinite(as_float32(features)).all():
        raise DataError(
            f"{path}: 'features' must hold at least one row of finite numbers "
            f"(within {FLOAT32_RANGE})"
        )
    check_width(path, features, description)
    if description.grid is not None and len(features) != description.grid[0] * description.grid[1]:
        raise DataError(f"{path}: {len(features)} pixels; the model's grid is {description.grid}")
    graph = description.kind in ("graph", "molecule")
    if not graph:
        if "edges" in arrays:
            raise DataError(f"{path}: holds 'edges', but this model reads vector sets, no edges")
        return Example(None, features.astype(np.float32), NO_LABEL, source)
    edges, edge_features = arrays.get("edges"), arrays.get("edge_features")
    if edges is None or edges.ndim != 2 or edges.shape[1:] != (2,) or edges.dtype.kind not in "iu":
        raise DataError(f"{path}: this model reads graphs: needs an integer 'edges' array (E, 2)")
    if edges.size and (edges.min() < 0 or edges.max() >= len(features)):
        raise DataError(f"{path}: 'edges' names a node outside 0-{len(features) - 1}")
    if (edge_features is None) != (description.edge_dim is None) or (
        edge_features is not None and edge_features.shape != (len(edges), description.edge_dim)
    ):
        shape = "none" if description.edge_dim is None else f"(E, {description.edge_dim})"
        raise DataError(f"{path}: this model's 'edge_features' are {shape}")
    if edge_features is not None and not np.isfinite(as_float32(edge_features)).all():
        raise DataError(
            f"{path}: 'edge_features' must hold finite numbers (within {FLOAT32_RANGE})"
        )
    return Example(
        None,
        features.astype(np.float32),
        NO_LABEL,
        source,
        edges.astype(np.int64),
        None if edge_features is None else edge_features.astype(np.float32),
    )
