"""One file per ``model.architecture``, each registering its options class (exactly the
fields it reads) in :data:`~selfattn.models.registry.ARCHITECTURES`. Importing this
package imports them all, so the table is full; a new architecture is one more file here
and one line below.
"""

from __future__ import annotations

from typing import Any

from selfattn.models.architectures.bigru import BiGRUOptions
from selfattn.models.architectures.cnn import CNNOptions
from selfattn.models.architectures.cnn2d import CNN2DOptions
from selfattn.models.architectures.conformer import ConformerOptions
from selfattn.models.architectures.fc import FCOptions
from selfattn.models.architectures.fc_window import WindowFCOptions
from selfattn.models.architectures.graph import GraphOptions
from selfattn.models.architectures.lstm import LSTMOptions
from selfattn.models.architectures.memn2n import MemN2NOptions
from selfattn.models.architectures.ntm import NTMOptions
from selfattn.models.architectures.rnn import RNNOptions
from selfattn.models.architectures.transformer import TransformerOptions
from selfattn.models.registry import ARCHITECTURES, Architecture

#: The sequence encoders of the architectures that give one vector per input vector (the
#: image-grid encoder needs its grid: :func:`selfattn.models.vision.build_image_parts`).
ENCODERS: dict[str, Any] = {
    name: entry.encoder
    for name, entry in ARCHITECTURES.items()
    if entry.encoder is not None and "vectors" in entry.produces
}

__all__ = [
    "ARCHITECTURES",
    "ENCODERS",
    "Architecture",
    "BiGRUOptions",
    "CNN2DOptions",
    "CNNOptions",
    "ConformerOptions",
    "FCOptions",
    "GraphOptions",
    "LSTMOptions",
    "MemN2NOptions",
    "NTMOptions",
    "RNNOptions",
    "TransformerOptions",
    "WindowFCOptions",
]
