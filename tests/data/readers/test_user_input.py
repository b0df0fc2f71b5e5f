"""A user's file reads back as the recipe's training example it was written from."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import soundfile
from PIL import Image

from selfattn.data import DataError, DatasetSplits, Example, Recipe, load_dataset
from selfattn.data.readers.user_input import (
    InputDescription,
    check_text_input,
    describe_input,
    input_format,
    read_input,
)
from selfattn.data.readers.wav_csv import read_wav_csv
from selfattn.data.recipes.espeak import Espeak
from selfattn.data.recipes.graphs import ELEMENTS, read_sdf
from selfattn.data.recipes.images import image_shape
from selfattn.data.recipes.speech import (
    DIGIT_STRINGS_SPEC,
    DIGITS_SPEC,
    SpokenSpec,
    plan,
    render,
)
from selfattn.speech.features import SAMPLE_RATE

from ...helpers_data import MNIST_STORED as MNIST
from ...helpers_data import SPEECH_STORED as SPEECH

Fetched = Callable[[str], Recipe]


@functools.cache
def _splits(name: str) -> DatasetSplits:
    return load_dataset(name)


def loaded(fetched: Fetched, name: str) -> DatasetSplits:
    """The recipe's splits, loaded once for the module (fetched, or the test skipped)."""
    fetched(name)
    return _splits(name)


def description_of(splits: DatasetSplits) -> InputDescription:
    """What a checkpoint trained on ``splits`` would describe: stored format + TaskSpec."""
    first = splits.train[0]
    return describe_input(
        splits.name,
        splits.input,
        feature_dim=None if first.features is None else int(first.features.shape[1]),
        image_shape=image_shape(splits),
        edge_dim=None if first.edge_features is None else int(first.edge_features.shape[1]),
        stored=json.loads(json.dumps(input_format(splits))),  # as the checkpoint keeps it
    )


def one_line_error(argument: str, description: InputDescription, starts: str) -> str:
    with pytest.raises(DataError) as caught:
        read_input(argument, description)
    message = str(caught.value)
    assert "\n" not in message and message.startswith(starts), message
    return message


# ------------------------------------------------------------------------- images

IMAGE_RECIPES = ("digits", "mnist-5k", "fashion-mnist", "lra-image")


def training_pixels(example: Example, grid: tuple[int, int, int]) -> np.ndarray:
    """``(H, W)`` in [0, 1] as training saw them (lra-image's tokens are 0-255)."""
    if example.features is not None:
        return example.features.reshape(grid)[..., 0]
    return (
        np.array([int(t) for t in example.tokens or ()], dtype=np.float64).reshape(grid[:2]) / 255
    )


def assert_same_pixels(read: Example, example: Example) -> None:
    if example.features is not None:
        assert read.tokens is None and read.features is not None
        assert read.features.dtype == np.float32
        np.testing.assert_allclose(read.features, example.features, rtol=0, atol=1e-7)
    else:
        assert read.features is None and read.tokens == example.tokens


@pytest.mark.parametrize("name", IMAGE_RECIPES)
def test_png_of_a_training_image_reads_back_as_its_features(
    fetched: Fetched, name: str, tmp_path: Path
) -> None:
    splits = loaded(fetched, name)
    description = description_of(splits)
    assert description.kind == "image"
    assert description.levels == (16 if name == "digits" else 255)
    assert description.background == "dark"
    grid = description.grid
    assert grid is not None and grid[2] == 1
    for example in splits.train[:3]:
        grey = np.rint(training_pixels(example, grid) * 255).astype(np.uint8)
        path = tmp_path / "digit.png"
        Image.fromarray(grey).save(path)
        assert_same_pixels(read_input(str(path), description), example)
        # Black on white (a photo of paper) is turned into the training's white on black;
        # three times the size (and RGB) is averaged back down onto the grid.
        Image.fromarray(255 - grey).save(path)
        assert_same_pixels(read_input(str(path), description), example)
        big = Image.fromarray(grey).resize((grid[1] * 3, grid[0] * 3), Image.Resampling.NEAREST)
        big.convert("RGB").save(path)
        assert_same_pixels(read_input(str(path), description), example)


def test_a_jpeg_of_another_shape_is_padded_and_resized_to_the_grid(
    fetched: Fetched, tmp_path: Path
) -> None:
    splits = loaded(fetched, "mnist-5k")
    description = description_of(splits)
    grey = np.rint(training_pixels(splits.train[0], (28, 28, 1)) * 255).astype(np.uint8)
    # A wide photo: the digit in the middle of a dark strip twice as wide as tall.
    wide = np.zeros((56, 112), np.uint8)
    wide[:, 28:84] = np.asarray(Image.fromarray(grey).resize((56, 56)))
    Image.fromarray(wide).save(tmp_path / "wide.jpg", quality=95)
    read = read_input(str(tmp_path / "wide.jpg"), description)
    assert read.features is not None and read.features.shape == (784, 1)
    # Kept in proportion: the middle half of the rows holds the digit, shrunk by half.
    middle = read.features.reshape(28, 28)[7:21]
    assert middle.sum() > 0.9 * read.features.sum()


# ------------------------------------------------------------------------- speech


@pytest.mark.parametrize(
    ("name", "spec"), [("digits-espeak", DIGITS_SPEC), ("digit-strings-espeak", DIGIT_STRINGS_SPEC)]
)
def test_wav_of_a_training_utterance_gives_its_features(
    fetched: Fetched, name: str, spec: SpokenSpec, tmp_path: Path
) -> None:
    recipe = fetched(name)
    splits = loaded(fetched, name)
    description = description_of(splits)
    assert description.kind == "speech"
    example = splits.train[7]
    index = int(example.source.split(":")[0].rsplit("/", 1)[1])  # name/voice/index: text
    samples = render(Espeak(recipe.fetch()), plan(spec)[index])
    soundfile.write(tmp_path / "said.wav", samples, SAMPLE_RATE, subtype="FLOAT")
    read = read_input(str(tmp_path / "said.wav"), description)
    assert read.features is not None and example.features is not None
    np.testing.assert_allclose(read.features, example.features, rtol=0, atol=1e-5)
    # FLAC holds 24-bit integers: the same vectors up to that rounding.
    soundfile.write(tmp_path / "said.flac", samples, SAMPLE_RATE, subtype="PCM_24")
    flac = read_input(str(tmp_path / "said.flac"), description)
    assert flac.features is not None
    np.testing.assert_allclose(flac.features, example.features, rtol=0, atol=2e-3)


def test_another_sample_rate_is_resampled_as_training_resamples_a_users_wavs(
    tmp_path: Path,
) -> None:
    """Training on a user's WAV folder resamples to 16 kHz (read_wav_csv); so does predict."""
    t = np.arange(int(0.6 * 22_050)) / 22_050
    rng = np.random.default_rng(0)
    wave = 0.3 * np.sin(2 * np.pi * 440 * t * (1 + t)) + 0.01 * rng.standard_normal(len(t))
    soundfile.write(tmp_path / "tone.wav", wave.astype(np.float32), 22_050, subtype="FLOAT")
    (tmp_path / "labels.csv").write_text("path,label\ntone.wav,a\n", encoding="utf-8")
    trained = read_wav_csv(tmp_path / "labels.csv")[0]
    description = describe_input(
        "mine",
        "vectors",
        feature_dim=120,
        stored=SPEECH,
    )
    read = read_input(str(tmp_path / "tone.wav"), description)
    assert read.features is not None and trained.features is not None
    np.testing.assert_array_equal(read.features, trained.features)
    # The FLAC path resamples the same way.
    soundfile.write(tmp_path / "tone.flac", wave.astype(np.float32), 22_050, subtype="PCM_24")
    flac = read_input(str(tmp_path / "tone.flac"), description)
    assert flac.features is not None and flac.features.shape == read.features.shape
    np.testing.assert_allclose(flac.features, read.features, atol=2e-3)


def test_input_format_of_a_users_wav_folder_is_speech(tmp_path: Path) -> None:
    samples = np.random.default_rng(0).standard_normal(8000).astype(np.float32) * 0.1
    soundfile.write(tmp_path / "a.wav", samples, SAMPLE_RATE)
    (tmp_path / "labels.csv").write_text("path,label\na.wav,x\n", encoding="utf-8")
    assert input_format(load_dataset(tmp_path / "labels.csv"))["kind"] == "speech"
    np.savez(tmp_path / "sets.npz", features=np.ones((3, 2)), lengths=[3], labels=["x"])
    assert input_format(load_dataset(tmp_path / "sets.npz")) == {"kind": "vectors"}


def test_a_changed_speech_front_end_is_refused() -> None:
    stored = {"kind": "speech", "sample_rate": 16000, "n_mels": 80, "stack": 3}
    with pytest.raises(DataError, match="another speech front end"):
        describe_input("digits-espeak", "vectors", feature_dim=240, stored=stored)


# ------------------------------------------------------------------------- graphs


Molecules = tuple[Recipe, DatasetSplits, InputDescription]


@pytest.fixture
def solubility(fetched: Fetched) -> Molecules:
    """The molecule recipe, its splits and what a checkpoint trained on them describes."""
    recipe = fetched("solubility")
    splits = loaded(fetched, "solubility")
    return recipe, splits, description_of(splits)


def assert_same_graph(read: Example, example: Example) -> None:
    """``read`` holds ``example``'s node features, edges and edge features."""
    for field in ("features", "edges", "edge_features"):
        np.testing.assert_array_equal(getattr(read, field), getattr(example, field))


def test_graph_json_of_a_training_molecule_reproduces_its_example(
    solubility: Molecules, tmp_path: Path
) -> None:
    recipe, splits, description = solubility
    assert description.kind == "molecule"
    molecules = {m.source: m for m in read_sdf(recipe.fetch()[0])}
    # A charged molecule with double bonds and an element outside ELEMENTS if there is one.
    chosen = [
        e
        for e in splits.train
        if any(molecules[e.source].charges)
        or any(order == 2 for *_, order in molecules[e.source].bonds)
    ][:5]
    assert chosen
    for example in chosen:
        molecule = molecules[example.source]
        atoms = [
            element + ("" if charge == 0 else f"{'+' if charge > 0 else '-'}{abs(charge)}")
            for element, charge in zip(molecule.elements, molecule.charges, strict=True)
        ]
        graph = {"nodes": atoms, "edges": [list(bond) for bond in molecule.bonds]}
        (tmp_path / "molecule.json").write_text(json.dumps(graph), encoding="utf-8")
        for argument in (str(tmp_path / "molecule.json"), json.dumps(graph)):
            assert_same_graph(read_input(argument, description), example)


def test_a_mol_file_of_a_training_molecule_reproduces_its_example(
    solubility: Molecules, tmp_path: Path
) -> None:
    recipe, splits, description = solubility
    example = splits.train[10]
    lines = recipe.fetch()[0].read_text(encoding="utf-8").splitlines()
    start = int(example.source.rsplit(":", 1)[1]) - 1
    end = next(i for i in range(start, len(lines)) if lines[i].startswith("M  END"))
    (tmp_path / "one.mol").write_text("\n".join(lines[start : end + 1]) + "\n", encoding="utf-8")
    record = lines[start : next(i for i in range(start, len(lines)) if lines[i] == "$$$$") + 1]
    (tmp_path / "one.sdf").write_text("\n".join(record) + "\n", encoding="utf-8")
    for name in ("one.mol", "one.sdf"):
        assert_same_graph(read_input(str(tmp_path / name), description), example)
    (tmp_path / "two.sdf").write_text("\n".join(record * 2) + "\n", encoding="utf-8")
    one_line_error(str(tmp_path / "two.sdf"), description, f"{tmp_path / 'two.sdf'}: holds 2")


def test_graph_json_of_the_karate_club_reproduces_its_example(
    fetched: Fetched, tmp_path: Path
) -> None:
    splits = loaded(fetched, "karate")
    description = description_of(splits)
    assert description.kind == "graph" and description.symmetric
    example = splits.train[0]
    assert example.features is not None and example.edges is not None
    once = example.edges[: len(example.edges) // 2]  # training lists them, then reversed
    graph = {"nodes": example.features.tolist(), "edges": once.tolist()}
    read = read_input(json.dumps(graph), description)
    np.testing.assert_array_equal(read.features, example.features)
    np.testing.assert_array_equal(read.edges, example.edges)
    assert read.edge_features is None
    # Both directions listed: the same graph, no edge twice.
    graph["edges"] = example.edges.tolist()
    np.testing.assert_array_equal(read_input(json.dumps(graph), description).edges, example.edges)


def test_graph_json_errors_name_the_problem(tmp_path: Path) -> None:
    description = describe_input("g", "vectors", feature_dim=2, stored={"kind": "graph"})
    one_line_error('{"nodes": [[1, 2]], "edges": [[0, 3]]}', description, "input: edge 0")
    one_line_error('{"nodes": [[1, 2, 3]], "edges": []}', description, "input: 3 features")
    one_line_error('{"nodes": [[1, 2]], "edge_features": [[1]]}', description, "input: this")
    (tmp_path / "g.json").write_text('{"nodes": [[1, 2]],', encoding="utf-8")
    one_line_error(str(tmp_path / "g.json"), description, f"{tmp_path / 'g.json'}: not valid JSON")
    molecule = describe_input("solubility", "vectors", stored=input_format_molecule())
    one_line_error('{"nodes": ["C", "Xx9"]}', molecule, "input: node 1 is not an atom")
    # A typo is not silently the "other element" column (tin is, being real).
    one_line_error('{"nodes": ["C", "Cx"]}', molecule, "input: node 1: 'Cx' is not an element")
    assert read_input('{"nodes": ["C", "Sn"], "edges": [[0, 1]]}', molecule).features is not None
    one_line_error('{"nodes": ["C", "O"], "edges": [[0, 1], [1, 0]]}', molecule, "input: bond 1-0")


def input_format_molecule() -> dict[str, object]:
    return {"kind": "molecule", "elements": list(ELEMENTS), "bond_orders": [1, 2, 3, 4]}


# --------------------------------------------------------------------------- .npz


def test_npz_round_trip_of_vectors_and_graphs(fetched: Fetched, tmp_path: Path) -> None:
    splits = loaded(fetched, "speaker-jv")
    description = description_of(splits)
    assert description.kind == "vectors"
    example = splits.test[0]
    assert example.features is not None
    np.savez(tmp_path / "one.npz", features=example.features)
    read = read_input(str(tmp_path / "one.npz"), description)
    np.testing.assert_array_equal(read.features, example.features)
    assert read.edges is None
    # A training file holding one set (features, lengths, labels) reads too; two do not.
    np.savez(tmp_path / "set.npz", features=example.features, lengths=[len(example)], labels=["1"])
    np.testing.assert_array_equal(
        read_input(str(tmp_path / "set.npz"), description).features, example.features
    )
    np.savez(tmp_path / "two.npz", features=np.zeros((4, 12)), lengths=[2, 2], labels=["1", "2"])
    one_line_error(str(tmp_path / "two.npz"), description, f"{tmp_path / 'two.npz'}: holds 2")
    np.savez(tmp_path / "wide.npz", features=np.zeros((4, 13)))
    one_line_error(str(tmp_path / "wide.npz"), description, f"{tmp_path / 'wide.npz'}: 13 features")

    molecules = loaded(fetched, "solubility")
    graph = molecules.test[0]
    features, edges, edge_features = graph.features, graph.edges, graph.edge_features
    assert features is not None and edges is not None and edge_features is not None
    np.savez(tmp_path / "graph.npz", features=features, edges=edges, edge_features=edge_features)
    read = read_input(str(tmp_path / "graph.npz"), description_of(molecules))
    for field in ("features", "edges", "edge_features"):
        np.testing.assert_array_equal(getattr(read, field), getattr(graph, field))
    plain = describe_input("v", "vectors", feature_dim=22, stored={"kind": "vectors"})
    one_line_error(str(tmp_path / "graph.npz"), plain, f"{tmp_path / 'graph.npz'}: holds 'edges'")


# -------------------------------------------------------------------- wrong kinds


def test_wrong_kind_of_input_is_one_line_naming_what_the_model_reads(tmp_path: Path) -> None:
    text = describe_input("sentiment-rt", "text", stored={"kind": "text"})
    image = describe_input(
        "mnist-5k",
        "vectors",
        feature_dim=1,
        image_shape=(28, 28, 1),
        stored=MNIST,
    )
    speech = describe_input(
        "digits-espeak",
        "vectors",
        feature_dim=120,
        stored=SPEECH,
    )
    vectors = describe_input("speaker-jv", "vectors", feature_dim=12, stored={"kind": "vectors"})
    molecule = describe_input("solubility", "vectors", stored=input_format_molecule())

    with pytest.raises(
        DataError, match=r"^photo\.png: this model reads text; give the text itself or @FILE$"
    ):
        check_text_input("photo.png", text)
    check_text_input("I saw a saw.png of wood", text)  # a sentence, not a file name
    with pytest.raises(ValueError, match="tokenised by its caller"):
        read_input("I saw", text)

    assert one_line_error("I saw", speech, '"I saw": ') == (
        '"I saw": this model reads spoken audio: give a .wav or .flac file'
    )
    assert "give a .png or .jpg file" in one_line_error(
        "I saw", image, '"I saw": this model reads images'
    )
    assert "SMILES" in one_line_error("CCO", molecule, '"CCO": this model reads molecules')
    one_line_error("missing.png", image, "missing.png: no such file")

    Image.new("L", (4, 4)).save(tmp_path / "photo.png")
    soundfile.write(tmp_path / "said.wav", np.zeros(8000, np.float32), SAMPLE_RATE)
    np.savez(tmp_path / "v.npz", features=np.zeros((3, 12)))
    png, wav = str(tmp_path / "photo.png"), str(tmp_path / "said.wav")
    one_line_error(png, speech, f"{png}: this model reads spoken audio")
    one_line_error(wav, image, f"{wav}: this model reads images")
    one_line_error(png, vectors, f"{png}: this model reads vector sets")
    one_line_error(png, molecule, f"{png}: this model reads molecules")
    one_line_error(str(tmp_path), image, f"{tmp_path}: a folder")


@pytest.mark.parametrize(
    ("name", "content"),
    [
        ("bad.png", b"not a picture"),
        ("bad.jpg", b"\xff\xd8\xff\xe0 cut short"),
        ("bad.wav", b"RIFF junk"),
        ("bad.flac", b"fLaC junk"),
        ("bad.npz", b"PK junk"),
        ("bad.mol", b"x\ny\nz\n  nope\n"),
        ("bad.json", b"\xff\xfe"),
    ],
)
def test_a_corrupt_file_is_one_line_naming_it(name: str, content: bytes, tmp_path: Path) -> None:
    kinds = {
        ".png": describe_input(
            "fashion-mnist",
            "vectors",
            feature_dim=1,
            stored=MNIST,
        ),
        ".wav": describe_input(
            "d",
            "vectors",
            feature_dim=120,
            stored=SPEECH,
        ),
        ".npz": describe_input("v", "vectors", feature_dim=12, stored={"kind": "vectors"}),
        ".mol": describe_input("solubility", "vectors", stored=input_format_molecule()),
    }
    kinds[".jpg"], kinds[".flac"], kinds[".json"] = kinds[".png"], kinds[".wav"], kinds[".mol"]
    path = tmp_path / name
    path.write_bytes(content)
    one_line_error(str(path), kinds[path.suffix], f"{path}:")


def test_a_too_short_recording_is_refused(tmp_path: Path) -> None:
    speech = describe_input(
        "d",
        "vectors",
        feature_dim=120,
        stored=SPEECH,
    )
    soundfile.write(tmp_path / "blip.wav", np.ones(200, np.float32) * 0.1, SAMPLE_RATE)
    one_line_error(str(tmp_path / "blip.wav"), speech, f"{tmp_path / 'blip.wav'}: too short")


def test_a_malformed_stored_image_format_is_refused() -> None:
    stored = {
        "kind": "image",
        "grid": [28, 28],
        "levels": 255,
        "background": "dark",
        "pixel_tokens": False,
    }
    with pytest.raises(DataError, match=r"^mnist-5k: the checkpoint's image input format: grid"):
        describe_input("mnist-5k", "vectors", stored=stored)
    stored["grid"] = [28, 28, 1]
    with pytest.raises(DataError, match="differs from the model's image_shape"):
        describe_input("mnist-5k", "vectors", image_shape=(8, 8, 1), stored=stored)


def test_an_old_checkpoint_of_a_recipe_gets_the_recipes_format(fetched: Fetched) -> None:
    fetched("digits")
    description = describe_input("digits", "vectors", feature_dim=1, image_shape=(8, 8, 1))
    assert (description.kind, description.levels, description.grid) == ("image", 16, (8, 8, 1))
    assert describe_input("my.npz", "vectors", feature_dim=3).kind == "vectors"


@pytest.mark.parametrize(("name", "kind"), [("pos-wsj", "text"), ("sentiment-rt", "text")])
def test_input_format_of_a_text_recipe_is_text(fetched: Fetched, name: str, kind: str) -> None:
    assert input_format(loaded(fetched, name)) == {"kind": kind}
