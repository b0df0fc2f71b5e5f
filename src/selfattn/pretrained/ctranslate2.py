"""A CTranslate2 model file, read without CTranslate2.

CTranslate2 (``model.bin``, binary version 6) is a flat little-endian file:

* a header: ``uint32`` version, the spec's name (``WhisperSpec``), ``uint32`` revision,
  ``uint32`` number of variables;
* each variable: its name, ``uint8`` rank, ``rank × uint32`` dimensions, ``uint8`` dtype
  id (:data:`DTYPES`), ``uint32`` byte count, then the raw values;
* ``uint32`` number of aliases, each a pair of names (``decoder/projection/weight`` →
  ``decoder/embeddings/weight``: a tied output projection);

a string being ``uint16`` length (terminating NUL included), the bytes, the NUL. Every
size is checked against what is left of the file before anything is read or allocated, so
a truncated or lying file is refused in one line naming it. A model split into parts
(``model.bin.part1``, ``model.bin.part2``) is read as their concatenation.

>>> model = read_ct2(["model.bin.part1", "model.bin.part2"])
>>> model.spec, model.variables["encoder/conv1/weight"].shape
('WhisperSpec', (512, 80, 3))
"""

from __future__ import annotations

import math
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from selfattn.pretrained.errors import PretrainedError

__all__ = ["BINARY_VERSION", "DTYPES", "CT2Model", "read_ct2"]

#: The binary version this reader understands.
BINARY_VERSION = 6
#: CTranslate2's dtype ids (its ``DataType`` enum) → numpy. bfloat16 has no numpy type: it is
#: read as uint16 and widened to float32 (:func:`_bfloat16_to_float32`).
DTYPES: dict[int, np.dtype[Any]] = {
    0: np.dtype("<f4"),
    1: np.dtype("i1"),
    2: np.dtype("<i2"),
    3: np.dtype("<i4"),
    4: np.dtype("<f2"),
    5: np.dtype("<u2"),
}
_BFLOAT16 = 5
_MAX_RANK = 8


@dataclass(frozen=True)
class CT2Model:
    """A CTranslate2 model file's contents.

    Attributes:
        spec: the spec's name (``WhisperSpec``).
        revision: the spec's revision.
        variables: every variable by name, as stored (float16 stays float16).
        aliases: alias → the variable it names.
    """

    spec: str
    revision: int
    variables: dict[str, np.ndarray]
    aliases: dict[str, str]

    def get(self, name: str) -> np.ndarray | None:
        """The variable ``name``, following an alias; ``None`` when there is none."""
        return self.variables.get(self.aliases.get(name, name))


class _Reader:
    """Bounds-checked reads from a byte buffer; errors name ``source``."""

    def __init__(self, data: memoryview, source: str) -> None:
        self.data, self.source, self.offset = data, source, 0

    def take(self, size: int, what: str) -> memoryview:
        if size < 0 or self.offset + size > len(self.data):
            left = len(self.data) - self.offset
            raise PretrainedError(
                f"{self.source}: truncated or corrupt CTranslate2 file ({what} needs {size} "
                f"bytes at offset {self.offset}, {left} left)"
            )
        chunk = self.data[self.offset : self.offset + size]
        self.offset += size
        return chunk

    def unpack(self, fmt: str, what: str) -> int:
        return int(struct.unpack("<" + fmt, self.take(struct.calcsize("<" + fmt), what))[0])

    def string(self, what: str) -> str:
        size = self.unpack("H", f"the length of {what}")
        raw = bytes(self.take(size, what))
        if size == 0 or raw[-1] != 0:
            raise PretrainedError(f"{self.source}: {what} at offset {self.offset} is not NUL-ended")
        try:
            return raw[:-1].decode("utf-8")
        except UnicodeDecodeError:
            raise PretrainedError(f"{self.source}: {what} is not UTF-8") from None


def read_ct2(paths: str | Path | Sequence[str | Path]) -> CT2Model:
    """Read a CTranslate2 ``model.bin`` (one file, or its parts in order, joined).

    Raises:
        PretrainedError: a part missing, another binary version, a size that the file does
            not hold, an unknown dtype, a byte count that is not the shape's, or bytes
            after the aliases (one line naming the file).
    """
    parts = [Path(paths)] if isinstance(paths, str | Path) else [Path(p) for p in paths]
    source = " + ".join(str(p) for p in parts)
    chunks = []
    for part in parts:
        try:
            chunks.append(part.read_bytes())
        except OSError as error:
            raise PretrainedError(f"{part}: cannot read ({error.strerror or error})") from None
    reader = _Reader(memoryview(b"".join(chunks)), source)
    version = reader.unpack("I", "the binary version")
    if version != BINARY_VERSION:
        raise PretrainedError(
            f"{source}: CTranslate2 binary version {version}; only {BINARY_VERSION} is read"
        )
    spec = reader.string("the spec name")
    revision = reader.unpack("I", "the spec revision")
    count = reader.unpack("I", "the variable count")
    variables: dict[str, np.ndarray] = {}
    for index in range(count):
        name = reader.string(f"variable {index}'s name")
        variables[name] = _variable(reader, name)
    aliases: dict[str, str] = {}
    for index in range(reader.unpack("I", "the alias count")):
        alias = reader.string(f"alias {index}")
        aliases[alias] = reader.string(f"alias {alias!r}'s target")
        if aliases[alias] not in variables:
            raise PretrainedError(f"{source}: alias {alias!r} names no variable")
    if reader.offset != len(reader.data):
        raise PretrainedError(
            f"{source}: {len(reader.data) - reader.offset} bytes after the last alias "
            "(not a CTranslate2 file, or parts joined in the wrong order)"
        )
    return CT2Model(spec, revision, variables, aliases)


def _variable(reader: _Reader, name: str) -> np.ndarray:
    """One variable's values, after its name."""
    rank = reader.unpack("B", f"{name!r}'s rank")
    if rank > _MAX_RANK:
        raise PretrainedError(f"{reader.source}: variable {name!r} has rank {rank}")
    shape = tuple(reader.unpack("I", f"{name!r}'s shape") for _ in range(rank))
    dtype_id = reader.unpack("B", f"{name!r}'s dtype")
    if dtype_id not in DTYPES:
        raise PretrainedError(f"{reader.source}: variable {name!r} has unknown dtype id {dtype_id}")
    dtype = DTYPES[dtype_id]
    size = reader.unpack("I", f"{name!r}'s byte count")
    expected = math.prod(shape) * dtype.itemsize
    if size != expected:
        raise PretrainedError(
            f"{reader.source}: variable {name!r} of shape {list(shape)} says {size} bytes, "
            f"its shape needs {expected}"
        )
    values = np.frombuffer(reader.take(size, f"variable {name!r}"), dtype=dtype).reshape(shape)
    return _bfloat16_to_float32(values) if dtype_id == _BFLOAT16 else values


def _bfloat16_to_float32(values: np.ndarray) -> np.ndarray:
    """bfloat16 stored as uint16: the high half of a float32."""
    return (values.astype(np.uint32) << 16).view(np.float32)
