"""Every task type × every input kind a shipped recipe has, from the command line: train
a few steps, ``eval``, ``predict`` on a user's file of that kind, ``attention -o x.png``
— from a temporary folder, with nothing beyond the cached recipes.

A recipe's config is shrunk (a fraction of its training data, one epoch, a small model
where its own is large) so each case takes seconds; what is checked is that the road
from the config to a prediction and a map exists and holds, for every kind of input.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import soundfile
from PIL import Image

from selfattn.cli.main import main
from selfattn.data import Example, load_dataset
from selfattn.explore import read_payload
from selfattn.explore.payload import PayloadBuilder
from selfattn.explore.server import Explorer
from selfattn.tasks.predictor import Predictor

from ..helpers_cli import one_line_error

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
    "multilabel-text": (
        "wsj_constructions",
        "wsj-constructions",
        _text("Who said prices would rise ?"),
        ["data.train_fraction=0.1", *SMALL],
    ),
    "seq2seq-text-label-sets": (
        "wsj_constructions_seq2seq",
        "wsj-constructions",
        _text("Who said prices would rise ?"),
        ["data.train_fraction=0.1", *SMALL],
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

    page = tmp_path / "page.html"
    assert main(["explore", str(run_dir), argument, "-o", str(page)]) == 0
    payload = read_payload(page.read_text(encoding="utf-8"))
    check_explorer_payload(payload, case)
    if Path(argument).is_file():  # a file is shown by its name, not its folder
        assert payload["examples"][0]["label"] == Path(argument).name
    assert capsys.readouterr().out.startswith(f"wrote {page}: 1 input")
    assert main(["attention", str(run_dir), argument, "--stats"]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert stats["figures"] and all(figure["heads"] for figure in stats["figures"])
    uploads = tmp_path / "uploads"
    uploads.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(uploads))
    check_served_uploads(run_dir, argument)
    assert list(uploads.iterdir()) == []  # each upload's folder is gone after its request


def check_served_uploads(run_dir: Path, argument: str) -> None:
    """What the served explorer does with an upload of the model's kind, and with a
    malformed one (a one-line refusal)."""
    builder = PayloadBuilder(Predictor(run_dir), options={}, title="run", serve=True)
    explorer = Explorer(builder, [])
    if builder.description.kind == "text":
        [example] = explorer.maps({"text": (None, argument.encode())})["examples"]
    else:
        path = Path(argument)
        if not path.is_file():  # graph JSON given inline
            return
        [example] = explorer.maps({"file": (path.name, path.read_bytes())})["examples"]
        assert example["label"] == path.name
        with pytest.raises(ValueError) as refused:
            explorer.maps({"file": (f"broken{path.suffix}", b"\x00 not a real file")})
        assert "\n" not in str(refused.value) and str(refused.value).startswith("broken")
    assert example["figures"]


def check_explorer_payload(payload: dict[str, object], case: str) -> None:
    """The explorer's page holds every map, consistent in shape, and the input's picture."""
    [example] = payload["examples"]  # type: ignore[misc]
    assert example["figures"]
    for figure in example["figures"]:
        for layer in figure["maps"]:
            for head in layer:
                assert len(head) == len(figure["queries"])
                assert all(len(row) == len(figure["keys"]) for row in head)
                assert all(sum(row) <= 1 + 1e-4 for row in head)
        heads = [len(layer) for layer in figure["maps"]]
        assert [len(row) for row in figure["entropy"]] == heads
    kind = case.split("-")[1]
    assert (example["image"] is not None) == (kind == "image")
    assert (example["spectrogram"] is not None) == (kind == "speech")
    assert (example["graph"] is not None) == (kind in ("graph", "molecule"))
    if kind == "image":
        grid = example["image"]
        keys = example["figures"][0]["keys"]
        assert grid["rows"] * grid["cols"] in (len(keys), len(keys) - 1)  # [CLS] first


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
    err = one_line_error(capsys, ["predict", str(run_dir), "I saw a saw"])
    assert "image" in err
    wav = _speech(load_dataset("digits").test[0], tmp_path)
    err = one_line_error(capsys, ["predict", str(run_dir), wav])
    assert "spoken.wav" in err
