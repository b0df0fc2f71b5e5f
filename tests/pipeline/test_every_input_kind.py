"""Every task type × every input kind a shipped recipe has, from the command line: train
a few steps, ``eval``, ``predict`` on a user's file of that kind, ``attention -o x.png``
— from a temporary folder, with nothing beyond the cached recipes.

A recipe's config is shrunk (a fraction of its training data, one epoch, a small model
where its own is large) so each case takes seconds; what is checked is that the road
from the config to a prediction and a map exists and holds, for every kind of input.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import soundfile
from PIL import Image

from selfattn.cli.main import main
from selfattn.data import Example, load_dataset

CONFIGS = Path(__file__).resolve().parents[2] / "configs"

pytestmark = pytest.mark.usefixtures("one_thread")


def _text(text: str) -> Callable[[Example, Path], str]:
    return lambda example, folder: text


def _image(example: Example, folder: Path) -> str:
    """The example's pixels as a greyscale PNG (8 × 8 digits: values 0…16)."""
    assert example.features is not None
    side = round(len(example) ** 0.5)
    pixels = example.features[:, 0].reshape(side, side)
    path = folder / "digit.png"
    Image.fromarray((pixels / pixels.max() * 255).astype(np.uint8)).save(path)
    return str(path)


def _speech(example: Example, folder: Path) -> str:
    """Half a second of a rising tone at 16 kHz: any recording reads."""
    time = np.arange(8000) / 16000
    path = folder / "spoken.wav"
    soundfile.write(path, 0.3 * np.sin(2 * np.pi * (300 + 400 * time) * time), 16000)
    return str(path)


def _molecule(example: Example, folder: Path) -> str:
    """Ethanol as graph JSON of atom symbols and bonds."""
    path = folder / "ethanol.json"
    path.write_text(json.dumps({"nodes": ["C", "C", "O"], "edges": [[0, 1, 1], [1, 2, 1]]}))
    return str(path)


def _graph(example: Example, folder: Path) -> str:
    """The test graph itself, as JSON of node vectors and edges."""
    assert example.features is not None and example.edges is not None
    path = folder / "club.json"
    nodes, edges = example.features.tolist(), example.edges.tolist()
    path.write_text(json.dumps({"nodes": nodes, "edges": edges}))
    return str(path)


def _vectors(example: Example, folder: Path) -> str:
    assert example.features is not None
    path = folder / "set.npz"
    np.savez(path, features=example.features)
    return str(path)


SMALL = ["model.embed_dim=32", "model.num_heads=2", "model.num_layers=1", "model.ffn_dim=32"]

#: task type-input kind[-architecture]: (config, recipe, what to predict on, overrides)
CASES = {
    "token-text": ("pos_wsj", "pos-wsj", _text("I saw a saw"), ["data.train_fraction=0.05"]),
    "sequence-text": (
        "sentiment_rt",
        "sentiment-rt",
        _text("a warm and funny film"),
        ["data.train_fraction=0.01"],
    ),
    "seq2seq-text": (
        "translate_de_en",
        "translate-de-en",
        _text("das ist gut ."),
        # BPE learned on 0.5 % of the data splits words finely: cut the rare long ones.
        ["data.train_fraction=0.005", "data.overlong=cut", *SMALL],
    ),
    "sequence-image": ("digits_vit", "digits", _image, ["data.train_fraction=0.05"]),
    "sequence-speech": ("digits_espeak", "digits-espeak", _speech, ["data.train_fraction=0.05"]),
    "seq2seq-speech": (
        "digit_strings_espeak",
        "digit-strings-espeak",
        _speech,
        ["data.train_fraction=0.02"],
    ),
    "seq2seq-speech-conformer": (
        "digit_strings_conformer",
        "digit-strings-espeak",
        _speech,
        ["data.train_fraction=0.02"],
    ),
    "sequence-vectors-conformer": (
        "speaker_jv_conformer",
        "speaker-jv",
        _vectors,
        ["data.train_fraction=0.1"],
    ),
    "sequence-molecule": ("solubility", "solubility", _molecule, ["data.train_fraction=0.05"]),
    "regression-molecule": (
        "solubility_logs",
        "solubility-logs",
        _molecule,
        ["data.train_fraction=0.05"],
    ),
    "token-graph": ("karate", "karate", _graph, []),
    "sequence-vectors": ("speaker_jv", "speaker-jv", _vectors, ["data.train_fraction=0.1"]),
    "seq2seq-vectors": ("convex_hull", "convex-hull-5", _vectors, ["data.train_fraction=0.002"]),
}


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(CASES))
def test_train_eval_predict_and_attention_on_a_users_file(
    case: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    fetched: Callable[[str], object],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    config, recipe, write_input, overrides = CASES[case]
    fetched(recipe)
    monkeypatch.chdir(tmp_path)  # nothing is written beside the sources
    run_dir = tmp_path / "run"
    settings = [
        f"run_dir={run_dir}",
        "train.epochs=1",
        "train.threads=1",
        "train.device=cpu",
        *overrides,
    ]
    flags = [arg for setting in settings for arg in ("--set", setting)]
    assert main(["train", str(CONFIGS / f"{config}.toml"), *flags, "--no-progress"]) == 0
    capsys.readouterr()

    assert main(["eval", str(run_dir), "--split", "dev"]) == 0
    metrics = json.loads(capsys.readouterr().out)
    assert metrics["split"] == "dev" and metrics["count"] > 0

    argument = write_input(load_dataset(recipe).test[0], tmp_path)
    assert main(["predict", str(run_dir), argument]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 1  # one input, one line (a
    # barely trained seq2seq model may decode nothing but EOS: an empty line)

    image = tmp_path / "x.png"
    assert main(["attention", str(run_dir), argument, "-o", str(image)]) == 0
    assert image.stat().st_size > 0
    assert capsys.readouterr().out.startswith(f"wrote {image}: ")


def test_a_model_given_the_wrong_kind_of_input_names_what_it_reads(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], fetched: Callable[[str], object]
) -> None:
    """An image model given text, and a speech model given an image: one line each."""
    fetched("digits")
    run_dir = tmp_path / "run"
    settings = [f"run_dir={run_dir}", "train.epochs=1", "train.threads=1"]
    settings += ["data.train_fraction=0.02"]
    flags = [arg for setting in settings for arg in ("--set", setting)]
    assert main(["train", str(CONFIGS / "digits_vit.toml"), *flags, "--no-progress"]) == 0
    capsys.readouterr()
    assert main(["predict", str(run_dir), "I saw a saw"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "image" in err
    wav = _speech(load_dataset("digits").test[0], tmp_path)
    assert main(["predict", str(run_dir), wav]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "spoken.wav" in err
