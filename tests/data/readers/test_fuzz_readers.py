"""Fuzz-style tests of the readers of a user's files, for training and for ``predict``.

Seeded generators (no Hypothesis) make, for each format, valid files and malformed or
oversized ones from them: truncated, bytes flipped or inserted, random bytes, empty, huge
declared sizes, wrong dtypes, deep JSON nesting, NaN and infinite numbers. Every case must
end, within :data:`CASE_SECONDS`, in either a sane result (examples of finite features) or
a one-line ``DataError`` / ``ValueError`` naming the file; anything else — a traceback of
another type, a hang, a runaway allocation — fails, naming the case and its seed.
"""

from __future__ import annotations

import io
import json
import math
import random
import resource
import signal
import struct
import time
import zipfile
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import soundfile
from PIL import Image

from selfattn.data import DataError, Example, load_dataset
from selfattn.data.readers.user_graphs import MAX_EDGES, MAX_NODES
from selfattn.data.readers.user_input import InputDescription, describe_input, read_input
from selfattn.datatypes import DatasetSplits

from ...helpers_data import GRAPH_INPUT as GRAPH
from ...helpers_data import IMAGE_INPUT as IMAGE
from ...helpers_data import MOLECULE_INPUT as MOLECULE
from ...helpers_data import SPEECH_INPUT as SPEECH

#: The most one case may take (a hang or a runaway is stopped here and fails); generous,
#: as the first audio case also loads librosa.
CASE_SECONDS = 10.0
#: The most the process's peak memory may grow over one format's cases.
MEMORY_BYTES = 1 << 30
CASES = 24  # malformed files per format, besides the fixed attacks

VECTORS = describe_input("v", "vectors", feature_dim=3, stored={"kind": "vectors"})

Case = tuple[str, bytes]  # (what was done, the file's bytes)


# ------------------------------------------------------------------ byte mutations


def mutations(rng: random.Random, valid: bytes, count: int = CASES) -> Iterator[Case]:
    """``count`` damaged copies of ``valid``, the empty file and random bytes."""
    yield "empty", b""
    yield "random bytes", rng.randbytes(rng.randint(1, 2000))
    for _ in range(count):
        data = bytearray(valid)
        kind = rng.choice(["truncate", "flip", "insert", "repeat", "zero"])
        at = rng.randrange(max(1, len(data)))
        if kind == "truncate":
            del data[at:]
        elif kind == "flip":
            for _ in range(rng.randint(1, 8)):
                data[rng.randrange(len(data))] = rng.randrange(256)
        elif kind == "insert":
            data[at:at] = rng.randbytes(rng.randint(1, 64))
        elif kind == "repeat":
            data[at:at] = data[at : at + rng.randint(1, 200)] * rng.randint(2, 50)
        else:
            data[at : at + rng.randint(1, 64)] = bytes(min(64, len(data) - at))
        yield f"{kind} at {at}", bytes(data)


def text_mutations(rng: random.Random, lines: list[str]) -> Iterator[Case]:
    """Damaged texts: a line's cells or tokens replaced by hostile ones."""
    hostile = ["nan", "inf", "-inf", "1e39", "", "\x00", "\t", ",", '"', "\ufeff", "x" * 200_000]
    for _ in range(CASES // 2):
        copy = list(lines)
        row = rng.randrange(len(copy))
        words = copy[row].split(" ")
        words[rng.randrange(len(words))] = rng.choice(hostile)
        copy[row] = " ".join(words)
        yield f"hostile token in line {row + 1}", "\n".join(copy).encode()
    yield "invalid UTF-8", "\n".join(lines).encode() + b"\n\xff\xfe bad\n"
    yield "only blank lines", b"\n\n \n\t\n"
    yield "CR line ends", "\r".join(lines).encode()


# ------------------------------------------------------------------ valid files


def csv_file(rng: random.Random, delimiter: str = ",") -> list[str]:
    words = ["good", "bad", "film", "plot", "a", "very", "it's", "3.5"]
    rows = [f"label{delimiter}text"]
    for i in range(12):
        text = " ".join(rng.choice(words) for _ in range(rng.randint(1, 6)))
        rows.append(f"{('neg', 'pos')[i % 2]}{delimiter}{text}")
    return rows


def regression_csv(rng: random.Random) -> list[str]:
    return ["label,text", *(f"{rng.uniform(-3, 3):.3f},a film {i}" for i in range(12))]


def regression_cases(rng: random.Random) -> Iterator[Case]:
    lines = regression_csv(rng)
    yield from _text(regression_csv)(rng)
    for label in ("nan", "inf", "-Infinity", "1e39", "0x10", "1_000"):
        copy = list(lines)
        row = rng.randrange(1, len(copy))
        copy[row] = f"{label},{copy[row].partition(',')[2]}"
        yield f"label {label} in line {row + 1}", "\n".join(copy).encode()


def tagged_file(rng: random.Random) -> list[str]:
    pairs = ["the/DT", "cat/NN", "sat/VBD", "on/IN", "mat/NN", "./."]
    return [" ".join(rng.choice(pairs) for _ in range(rng.randint(1, 6))) for _ in range(10)]


def conllu_file(rng: random.Random) -> list[str]:
    lines = []
    for sentence in range(4):
        lines.append(f"# sent_id = {sentence}")
        for i in range(1, rng.randint(2, 6)):
            tag = rng.choice(["NOUN", "VERB", "DET"])
            lines.append(f"{i}\tw{i}\tw{i}\t{tag}\t_\t_\t{i - 1}\tdep\t_\t_")
        lines.append("")
    return lines


def npy(shape: tuple[int, ...], descr: str, data: bytes) -> bytes:
    """A ``.npy`` file whose header says ``shape`` and ``descr``, whatever ``data`` is."""
    header = f"{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}"
    header += " " * (-(len(header) + 11) % 64) + "\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode() + data


def npz(members: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, data in members.items():
            archive.writestr(f"{name}.npy", data)
    return buffer.getvalue()


def npz_of(**arrays: Any) -> bytes:
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    return buffer.getvalue()


def npz_cases(rng: random.Random, *, training: bool) -> Iterator[Case]:
    features = np.asarray([[rng.random() for _ in range(3)] for _ in range(6)], np.float32)
    more = {"lengths": np.array([2, 4]), "labels": np.array(["a", "b"])} if training else {}
    valid = npz_of(features=features, **more)
    yield "valid", valid
    yield from mutations(rng, valid)
    for value in (np.nan, np.inf, -np.inf, 1e39):
        bad = features.astype(np.float64)
        bad[rng.randrange(6), rng.randrange(3)] = value
        yield f"a feature of {value}", npz_of(features=bad, **more)
    lengths = npy((2,), "<i8", np.array([2, 4]).tobytes())
    labels = npz_of(labels=np.array(["a", "b"]))  # unused: the member below is written raw
    del labels
    for shape in [(10**12, 3), (2**62, 2**62), (6, 10**12), (-1, 3)]:
        members = {"features": npy(shape, "<f4", features.tobytes())}
        if training:
            members["lengths"] = lengths
            members["labels"] = npy((2,), "<U1", "ab".encode("utf-32-le"))
        yield f"a header declaring {shape}", npz(members)
    for descr in ["|O", "<c16", "|b1", "<U3", "|V8", "<M8[s]"]:
        yield f"features of dtype {descr}", npz({"features": npy((6, 3), descr, bytes(144))})


def wav(samples: np.ndarray, rate: int, subtype: str) -> bytes:
    buffer = io.BytesIO()
    soundfile.write(buffer, samples, rate, subtype=subtype, format="WAV")
    return buffer.getvalue()


def wav_cases(rng: random.Random) -> Iterator[Case]:
    tone = (np.sin(np.arange(8000) / rng.uniform(3, 30)) * 0.5).astype(np.float32)
    pcm, floats = wav(tone, 16000, "PCM_16"), wav(tone, 16000, "FLOAT")
    yield "valid PCM", pcm
    yield "valid float", floats
    yield from mutations(rng, pcm, CASES // 2)
    yield from mutations(rng, floats, CASES // 2)
    for value in (np.nan, np.inf, -np.inf, 1e30, -3e38):
        bad = tone.copy()
        bad[rng.randrange(len(bad))] = value
        yield f"a sample of {value}", wav(bad, 16000, "FLOAT")
    for rate in (1, 7, 999, 400_000, 2**31 - 1):
        header = bytearray(pcm)
        header[24:28] = struct.pack("<I", rate)  # the canonical header's sample rate
        yield f"a header saying {rate} Hz", bytes(header)
    for size in (2**31, 2**32 - 1):
        header = bytearray(pcm)
        header[40:44] = struct.pack("<I", size)  # the data chunk's declared size
        yield f"a data chunk declaring {size} bytes", bytes(header)
    for channels in (0, 255, 65535):
        header = bytearray(pcm)
        header[22:24] = struct.pack("<H", channels)
        yield f"a header saying {channels} channels", bytes(header)


def png(width: int, height: int, rng: random.Random, mode: str = "L") -> bytes:
    buffer = io.BytesIO()
    image = Image.new(mode, (width, height))
    image.putdata([rng.randrange(256) for _ in range(width * height)] if mode == "L" else [])
    image.save(buffer, format="PNG")
    return buffer.getvalue()


def png_declaring(data: bytes, width: int, height: int) -> bytes:
    """``data`` (a PNG) whose IHDR says ``width`` × ``height``, its CRC made right."""
    chunk = b"IHDR" + struct.pack(">II", width, height) + data[24:29]
    return data[:12] + chunk + struct.pack(">I", zlib.crc32(chunk)) + data[33:]


def png_cases(rng: random.Random) -> Iterator[Case]:
    valid = png(rng.randint(4, 40), rng.randint(4, 40), rng)
    yield "valid", valid
    yield "valid RGBA", png(9, 7, rng, "RGBA")
    yield "valid 16-bit", png(9, 7, rng, "I;16")
    yield from mutations(rng, valid)
    for width, height in [(100_000, 1), (1, 100_000), (2**31 - 1, 2**31 - 1), (65_000, 65_000)]:
        yield f"IHDR declaring {width} × {height}", png_declaring(valid, width, height)
    yield "one pixel", png(1, 1, rng)
    for width, height in [(1, 100_000), (100_000, 1), (4097, 3), (300, 2)]:
        buffer = io.BytesIO()
        Image.new("L", (width, height)).save(buffer, format="PNG")  # valid, and hostile
        yield f"a valid {width} × {height} picture", buffer.getvalue()


def graph_cases(rng: random.Random, *, molecule: bool) -> Iterator[Case]:
    atoms = ["C", "N", "O", "S", "Cl", "N+", "O-"]
    n = rng.randint(2, 8)
    nodes: list[Any] = (
        [rng.choice(atoms) for _ in range(n)]
        if molecule
        else [[rng.random(), rng.random()] for _ in range(n)]
    )
    edges = [[i, i + 1] for i in range(n - 1)]
    valid = json.dumps({"nodes": nodes, "edges": edges}).encode()
    yield "valid", valid
    yield from mutations(rng, valid)
    hostile: list[Any] = [
        math.nan,
        math.inf,
        1e400,
        10**400,
        -(2**63),
        None,
        True,
        "1",
        [],
        {},
        [[[]]],
        "C" * 10_000,
    ]
    for value in hostile:
        graph = {"nodes": list(nodes), "edges": [list(e) for e in edges]}
        where = rng.choice(["node", "edge", "feature"])
        if where == "node" or (molecule and where == "feature"):
            graph["nodes"][rng.randrange(n)] = value
        elif where == "edge":
            graph["edges"][rng.randrange(n - 1)][rng.randrange(2)] = value
        else:
            graph["nodes"][rng.randrange(n)][rng.randrange(2)] = value
        yield f"a {where} of {str(value)[:20]}", json.dumps(graph).encode()
    for depth in (1000, 100_000):
        yield f"nesting {depth} deep", b'{"nodes": ' + b"[" * depth + b"]" * depth + b"}"
    yield "not an object", b"[1, 2, 3]"
    many = {"nodes": [nodes[0]] * (MAX_NODES + 1), "edges": edges}
    yield f"{MAX_NODES + 1} nodes", json.dumps(many).encode()
    many = {"nodes": nodes, "edges": [[0, 1]] * (MAX_EDGES + 1)}
    yield f"{MAX_EDGES + 1} edges", json.dumps(many).encode()
    yield "no nodes", b'{"nodes": [], "edges": []}'


MOLFILE = """ethanol
  selfattn

  3  2  0  0  0  0  0  0  0  0999 V2000
    0.0000    0.0000    0.0000 C   0  0  0  0  0  0  0  0  0  0  0  0
    1.5000    0.0000    0.0000 C   0  0  0  0  0  0  0  0  0  0  0  0
    2.0000    1.0000    0.0000 O   0  0  0  0  0  0  0  0  0  0  0  0
  1  2  1  0
  2  3  1  0
M  END
$$$$
"""


def mol_cases(rng: random.Random) -> Iterator[Case]:
    yield "valid", MOLFILE.encode()
    yield from mutations(rng, MOLFILE.encode())
    yield "999 atoms declared", MOLFILE.replace("  3  2", "999999").encode()
    yield "NaN coordinates", MOLFILE.replace("1.5000", "   nan").encode()
    yield "two molecules", (MOLFILE * 2).encode()


# ------------------------------------------------------------------ the harness


@contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    """Stop the block with ``TimeoutError`` after ``seconds`` (the main thread's alarm)."""

    def stop(signum: int, frame: object) -> None:
        raise TimeoutError(f"still running after {seconds} s")

    previous = signal.signal(signal.SIGALRM, stop)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def sane(result: object) -> str | None:
    """What is wrong with a reader's result, or ``None``."""
    examples: list[Example]
    if isinstance(result, DatasetSplits):
        examples = [*result.train, *result.dev, *result.test]
        for example in examples if result.task == "regression" else []:
            assert isinstance(example.label, str)
            with np.errstate(over="ignore"):
                label = np.float32(float(example.label))
            if not np.isfinite(label):
                return f"{example.source}: a regression label {example.label!r}"
    elif isinstance(result, Example):
        examples = [result]
    else:
        return f"returned {type(result).__name__}"
    if not examples:
        return "no examples and no error"
    for example in examples:
        if example.features is not None and not np.isfinite(example.features).all():
            return f"{example.source}: features that are not finite"
        label = example.label
        if isinstance(label, str) and label.lower().lstrip("+-") in ("nan", "inf", "infinity"):
            return f"{example.source}: a label {label!r}"
    return None


def check_cases(
    cases: Iterator[Case], suffix: str, read: Callable[[Path], object], tmp_path: Path
) -> None:
    """Each case read within :data:`CASE_SECONDS`: a sane result or a one-line refusal
    naming the file; all failures listed at once."""
    failures = []
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    for number, (what, data) in enumerate(cases):
        path = tmp_path / f"case{number}{suffix}"
        path.write_bytes(data)
        start = time.perf_counter()
        problem = None
        try:
            with time_limit(CASE_SECONDS):
                problem = sane(read(path))
        except (DataError, ValueError) as error:
            message = str(error)
            if "\n" in message or str(path) not in message:
                problem = f"{type(error).__name__} not one line naming the file: {message[:300]}"
        except Exception as error:
            problem = f"{type(error).__name__}: {' '.join(str(error).split())[:300]}"
        seconds = time.perf_counter() - start
        if problem is None and seconds > CASE_SECONDS:
            problem = f"took {seconds:.1f} s"
        if problem is not None:
            failures.append(f"{what} ({len(data)} bytes): {problem}")
        path.unlink()
    grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - peak
    assert grown < MEMORY_BYTES, f"peak memory grew {grown / 2**20:.0f} MiB"
    assert not failures, f"{len(failures)} failures:\n" + "\n".join(failures)


def _predict(description: InputDescription) -> Callable[[Path], object]:
    return lambda path: read_input(str(path), description)


def _train(**options: Any) -> Callable[[Path], object]:
    return lambda path: load_dataset(path, **options)


def _text(lines: Callable[[random.Random], list[str]]) -> Callable[[random.Random], Iterator[Case]]:
    def cases(rng: random.Random) -> Iterator[Case]:
        valid = lines(rng)
        yield "valid", "\n".join(valid).encode()
        yield from mutations(rng, "\n".join(valid).encode())
        yield from text_mutations(rng, valid)

    return cases


FORMATS: dict[str, tuple[Callable[[random.Random], Iterator[Case]], str, Callable[[Path], object]]]
FORMATS = {
    "csv": (_text(csv_file), ".csv", _train()),
    "tsv": (_text(lambda rng: csv_file(rng, "\t")), ".tsv", _train()),
    "regression csv": (regression_cases, ".csv", _train(task="regression")),
    "tagged text": (_text(tagged_file), ".txt", _train()),
    "conllu": (_text(conllu_file), ".conllu", _train()),
    "npz (training)": (lambda rng: npz_cases(rng, training=True), ".npz", _train()),
    "npz (predict)": (lambda rng: npz_cases(rng, training=False), ".npz", _predict(VECTORS)),
    "wav": (wav_cases, ".wav", _predict(SPEECH)),
    "png": (png_cases, ".png", _predict(IMAGE)),
    "graph json": (lambda rng: graph_cases(rng, molecule=False), ".json", _predict(GRAPH)),
    "molecule json": (lambda rng: graph_cases(rng, molecule=True), ".json", _predict(MOLECULE)),
    "mol": (mol_cases, ".mol", _predict(MOLECULE)),
}


@pytest.mark.parametrize("name", list(FORMATS))
@pytest.mark.parametrize("seed", [0, 1])
def test_malformed_input_is_refused_in_one_line_or_read_sanely(
    name: str, seed: int, tmp_path: Path
) -> None:
    generate, suffix, read = FORMATS[name]
    check_cases(generate(random.Random(f"{name} {seed}")), suffix, read, tmp_path)
