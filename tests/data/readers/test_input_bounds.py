"""A user's input is bounded before memory is spent on it, and samples that are not
finite numbers are refused: each refusal one line naming the file and the limit."""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pytest
import soundfile
from PIL import Image

from selfattn.data import DataError
from selfattn.data.readers import audio, user_graphs, user_images
from selfattn.data.readers.user_input import InputDescription, read_input
from selfattn.speech.features import SAMPLE_RATE

from ...helpers_data import GRAPH_INPUT as GRAPH
from ...helpers_data import IMAGE_INPUT as IMAGE
from ...helpers_data import MOLECULE_INPUT as MOLECULE
from ...helpers_data import SPEECH_INPUT as SPEECH


def refused(argument: str, description: InputDescription, starts: str, *words: str) -> str:
    """The one-line refusal of ``argument``, which starts with ``starts`` and holds
    ``words``, within two seconds of this process's CPU time (not wall time, which grows
    with whatever else shares the machine)."""
    start = time.process_time()
    with pytest.raises(DataError) as caught:
        read_input(argument, description)
    assert time.process_time() - start < 2.0
    message = str(caught.value)
    assert "\n" not in message and message.startswith(starts), message
    assert all(word in message for word in words), message
    return message


# ------------------------------------------------------------------------- images


@pytest.mark.parametrize("size", [(100_000, 1), (1, 100_000), (5000, 4000), (170, 10)])
def test_an_image_too_large_or_too_narrow_is_refused_from_its_header(
    size: tuple[int, int], tmp_path: Path
) -> None:
    """A 1 × 100,000 PNG is 177 bytes; padded to a square grid's proportions it was a
    74.5 GiB array."""
    path = tmp_path / "strip.png"
    Image.new("L", size).save(path)
    width, height = size
    refused(
        str(path),
        IMAGE,
        f"{path}: {width} × {height} pixels",
        f"{user_images.MAX_SIDE} pixels a side and {user_images.MAX_ASPECT}:1",
    )


def test_an_image_at_the_bounds_is_read(tmp_path: Path) -> None:
    path = tmp_path / "wide.png"
    Image.new("L", (user_images.MAX_ASPECT * 8, 8), 255).save(path)
    example = read_input(str(path), IMAGE)
    assert example.features is not None and example.features.shape == (28 * 28, 1)


# -------------------------------------------------------------------------- audio


def _wav(path: Path, samples: np.ndarray, rate: int = SAMPLE_RATE, subtype: str = "FLOAT") -> str:
    soundfile.write(path, samples, rate, subtype=subtype)
    return str(path)


@pytest.mark.parametrize(("value", "shown"), [(np.nan, "nan"), (np.inf, "inf"), (1e30, "1e+30")])
def test_a_float_wav_of_samples_that_are_not_finite_is_refused(
    value: float, shown: str, tmp_path: Path
) -> None:
    """It printed NaN probabilities, exit 0."""
    samples = np.full(SAMPLE_RATE // 2, 0.1, np.float32)
    samples[1234] = value
    path = _wav(tmp_path / "bad.wav", samples)
    refused(path, SPEECH, f"{path}: sample 1234 is {shown}", "finite")


def test_a_bad_sample_in_a_second_channel_is_found(tmp_path: Path) -> None:
    samples = np.full((SAMPLE_RATE // 2, 2), 0.1, np.float32)
    samples[77, 1] = -np.inf
    path = _wav(tmp_path / "stereo.wav", samples)
    refused(path, SPEECH, f"{path}: sample 77 is -inf")


@pytest.mark.parametrize("rate", [1, 999, 384_001])
def test_a_sample_rate_out_of_bounds_is_refused_before_resampling(
    rate: int, tmp_path: Path
) -> None:
    """A 16 KB WAV whose header says 1 Hz resampled to 16 kHz ran past 180 s at 4.3 GB."""
    samples = (np.sin(np.arange(8000) / 10) * 3000).astype(np.int16)
    path = _wav(tmp_path / "slow.wav", samples, rate, subtype="PCM_16")
    refused(path, SPEECH, f"{path}: sample rate {rate} Hz", "1,000 to 384,000 Hz")


def test_a_recording_too_long_is_refused_before_it_is_read(tmp_path: Path) -> None:
    rate = audio.MIN_SAMPLE_RATE
    samples = np.zeros(audio.MAX_SECONDS * rate + rate, np.int16)
    path = _wav(tmp_path / "long.wav", samples, rate, subtype="PCM_16")
    refused(path, SPEECH, f"{path}: 601.0 s of audio", f"up to {audio.MAX_SECONDS} s")


def test_audio_at_the_bounds_is_read(tmp_path: Path) -> None:
    rate = audio.MIN_SAMPLE_RATE
    samples = np.sin(np.arange(rate) / 3).astype(np.float32)
    samples[10] = -audio.MAX_AMPLITUDE  # loud, but finite and within the bound
    example = read_input(_wav(tmp_path / "low.wav", samples, rate), SPEECH)
    assert example.features is not None and np.isfinite(example.features).all()


# ------------------------------------------------------------------------- graphs


def _chain(atoms: int) -> str:
    return json.dumps({"nodes": ["C"] * atoms, "edges": [[i, i + 1] for i in range(atoms - 1)]})


def test_a_molecule_of_many_atoms_is_read_in_linear_time() -> None:
    """The duplicate-bond check compared every bond with every earlier one: 10,000 atoms
    took about 8 s, 100,000 ran past 180 s."""
    start = time.process_time()
    example = read_input(_chain(user_graphs.MAX_NODES), MOLECULE)
    assert time.process_time() - start < 3.0
    assert example.features is not None and len(example.features) == user_graphs.MAX_NODES


def test_a_duplicate_bond_is_still_refused_either_way_round() -> None:
    graph = {"nodes": ["C", "O", "N"], "edges": [[0, 1], [1, 2], [2, 1, 2]]}
    refused(json.dumps(graph), MOLECULE, "input: bond 2-1 of order 2: list each bond once")


@pytest.mark.parametrize("description", [MOLECULE, GRAPH], ids=["molecule", "graph"])
def test_a_graph_too_large_is_refused_naming_the_limit(
    description: InputDescription, tmp_path: Path
) -> None:
    nodes = user_graphs.MAX_NODES + 1
    node = "C" if description is MOLECULE else [1.0, 2.0]
    path = tmp_path / "big.json"
    path.write_text(json.dumps({"nodes": [node] * nodes, "edges": [[0, 1]]}))
    refused(
        str(path),
        description,
        f"{path}: {nodes} nodes and 1 edges",
        f"up to {user_graphs.MAX_NODES} nodes and {user_graphs.MAX_EDGES} edges",
    )
    edges = [[0, 1]] * (user_graphs.MAX_EDGES + 1)
    refused(json.dumps({"nodes": [node, node], "edges": edges}), description, "input: 2 nodes")


def test_graph_json_nested_too_deeply_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "deep.json"
    path.write_text("[" * 100_000 + "]" * 100_000)
    refused(str(path), GRAPH, f"{path}: JSON nested too deeply")
    refused('{"nodes": ' + "[" * 100_000, MOLECULE, "input: ")


def test_a_graph_json_file_too_large_is_refused_before_it_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(user_graphs, "MAX_JSON_BYTES", 100)
    path = tmp_path / "big.json"
    path.write_text(json.dumps({"nodes": [[1.0, 2.0]] * 20}))
    refused(str(path), GRAPH, f"{path}: 251 bytes; graph JSON is read up to 100 bytes")
