"""What a trained model reads, as every reader of a user's input is told it.

:class:`InputDescription` is built from a checkpoint by
:func:`~selfattn.data.readers.user_input.describe_input` and handed to the reader of the
input's kind (:mod:`.user_images`, :mod:`.user_speech`, :mod:`.user_graphs`,
:mod:`.user_vectors`); the suffixes say which reader a file goes to.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from selfattn.datatypes import DataError

InputForm = Literal["text", "image", "speech", "molecule", "graph", "vectors"]

IMAGE_SUFFIXES = frozenset({".png", ".jpg", ".jpeg", ".bmp", ".gif", ".tif", ".tiff", ".webp"})
AUDIO_SUFFIXES = frozenset({".wav", ".flac"})
MOLECULE_SUFFIXES = frozenset({".mol", ".sdf"})
#: Every file suffix a non-text model reads: a text model given one was given a file.
FILE_SUFFIXES = IMAGE_SUFFIXES | AUDIO_SUFFIXES | MOLECULE_SUFFIXES | {".json", ".npz"}

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
    """What a trained model reads (``describe_input`` builds it from a checkpoint).

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
        stack: speech: 10 ms frames per vector (3: the recipes' 30 ms vectors; 1: every
            frame, for a model of frame labels).
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
    stack: int = 3

    def expects(self) -> str:
        """``this model reads …: give …``, the end of every wrong-kind message."""
        return f"this model reads {_EXPECTS[self.kind]}"


def check_width(where: object, features: np.ndarray, description: InputDescription) -> None:
    """Refuse ``(L, F)`` vectors whose F is not the model's ``feature_dim``.

    Raises:
        DataError: ``where: 13 features a vector; this model reads 12``.
    """
    if description.feature_dim not in (None, features.shape[1]):
        raise DataError(
            f"{where}: {features.shape[1]} features a vector; this model reads "
            f"{description.feature_dim}"
        )
