"""The tensors' names, dtypes and shapes of a ``.safetensors`` file, read from its header
alone, so that a checkpoint's config can be compared with its weights before a model of
that config is built (and before gigabytes of tensors are read).

The format (https://huggingface.co/docs/safetensors): 8 bytes, the header's length N as a
little-endian unsigned integer; N bytes of JSON ``{name: {"dtype", "shape",
"data_offsets": [begin, end]}, "__metadata__": {...}}``; then the tensors' bytes, each at
its offsets from the end of the header. A header is believed only where it is consistent
with itself and with the file's size, so a shape it states is backed by bytes on disk.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from selfattn.pretrained.errors import PretrainedError

__all__ = ["DTYPE_SIZES", "MAX_HEADER_BYTES", "CheckpointError", "read_shapes"]

#: Bytes per element of each dtype the format names.
DTYPE_SIZES = {
    "BOOL": 1,
    "U8": 1,
    "I8": 1,
    "F8_E5M2": 1,
    "F8_E4M3": 1,
    "I16": 2,
    "U16": 2,
    "F16": 2,
    "BF16": 2,
    "I32": 4,
    "U32": 4,
    "F32": 4,
    "I64": 8,
    "U64": 8,
    "F64": 8,
}
#: The longest header read (the safetensors library's own limit is 100 MB).
MAX_HEADER_BYTES = 100_000_000


class CheckpointError(PretrainedError):
    """A checkpoint folder whose config or weights cannot be loaded: one line naming the
    file and the problem (a ``ValueError``, so the CLI prints it and exits with status 2)."""


def read_shapes(path: Path) -> dict[str, tuple[int, ...]]:
    """Every tensor's shape by name, from the header of the safetensors file ``path``.

    Raises:
        CheckpointError: ``path: not a readable safetensors file, truncated or corrupt
            (why)``: a header that is not JSON, names an unknown dtype, or whose offsets
            disagree with the shapes or run past the end of the file.
    """
    try:
        size = path.stat().st_size
        with path.open("rb") as handle:
            length = int.from_bytes(handle.read(8), "little") if size >= 8 else -1
            if not 2 <= length <= min(size - 8, MAX_HEADER_BYTES):
                raise _corrupt(path, f"a header of {length} bytes in a file of {size}")
            header = json.loads(handle.read(length))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, RecursionError) as error:
        raise _corrupt(path, f"header: {type(error).__name__}") from None
    if not isinstance(header, dict):
        raise _corrupt(path, "the header is not a JSON object")
    data_bytes = size - 8 - length
    shapes = {}
    for name, entry in header.items():
        if name != "__metadata__":
            shapes[name] = _shape(path, name, entry, data_bytes)
    return shapes


def _shape(path: Path, name: str, entry: Any, data_bytes: int) -> tuple[int, ...]:
    """One header entry's shape, once its dtype, shape and offsets agree with each other
    and lie within the ``data_bytes`` after the header."""
    if not isinstance(entry, dict):
        raise _corrupt(path, f"tensor {name!r} is not described by a JSON object")
    dtype, shape, offsets = entry.get("dtype"), entry.get("shape"), entry.get("data_offsets")
    if not isinstance(dtype, str) or dtype not in DTYPE_SIZES:
        raise _corrupt(path, f"tensor {name!r} has dtype {dtype!r}")
    if not (isinstance(shape, list) and all(_natural(n) for n in shape)):
        raise _corrupt(path, f"tensor {name!r} has shape {shape!r}")
    if not (isinstance(offsets, list) and len(offsets) == 2 and all(map(_natural, offsets))):
        raise _corrupt(path, f"tensor {name!r} has data_offsets {offsets!r}")
    begin, end = offsets
    if not begin <= end <= data_bytes or end - begin != math.prod(shape) * DTYPE_SIZES[dtype]:
        raise _corrupt(
            path, f"tensor {name!r} of shape {tuple(shape)} {dtype} at bytes {begin}-{end}"
        )
    return tuple(shape)


def _natural(value: object) -> bool:
    return type(value) is int and value >= 0


def _corrupt(path: Path, why: str) -> CheckpointError:
    return CheckpointError(f"{path}: not a readable safetensors file, truncated or corrupt ({why})")
