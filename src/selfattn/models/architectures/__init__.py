"""One file per ``model.architecture``, each registering its options class (exactly the
fields it reads) in :data:`~selfattn.models.registry.ARCHITECTURES`. Importing this
package imports them all, so the table is full: a new architecture is one more file here
(the shipped ones are also named below, for their options classes and the table's order).
"""

from __future__ import annotations

import importlib
import pkgutil
from typing import Any

from selfattn.models.architectures.bigru import BiGRUOptions
from selfattn.models.architectures.cnn import CNNOptions
from selfattn.models.architectures.cnn2d import CNN2DOptions
from selfattn.models.architectures.conformer import ConformerOptions
from selfattn.models.architectures.fc import FCOptions
from selfattn.models.architectures.fc_window import WindowFCOptions
from selfattn.models.architectures.graph import GraphOptions, GraphSequenceEncoder
from selfattn.models.architectures.lstm import LSTMOptions
from selfattn.models.architectures.memn2n import MemN2NOptions
from selfattn.models.architectures.ntm import NTMOptions
from selfattn.models.architectures.rnn import RNNOptions
from selfattn.models.architectures.transformer import TransformerOptions
from selfattn.models.encoders import SequenceEncoder
from selfattn.models.option_groups import EncoderOptions
from selfattn.models.registry import ARCHITECTURES, Architecture

# Every module here registers an architecture: those not named above register now.
for _module in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_module.name}")


def vector_encoders() -> dict[str, Any]:
    """The sequence encoders of the registered architectures that give one vector per
    input vector, by name (the image-grid encoder needs its grid:
    :func:`selfattn.models.vision.build_image_parts`). Read when called, so that an
    architecture registered later (in a user's own module) is among them."""
    return {
        name: entry.encoder
        for name, entry in ARCHITECTURES.items()
        if entry.encoder is not None and "vectors" in entry.produces
    }


#: :func:`vector_encoders` of the shipped architectures.
ENCODERS: dict[str, Any] = vector_encoders()

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
    "build_encoder",
    "vector_encoders",
]


def build_encoder(
    config: EncoderOptions, *, max_len: int = 512, edge_dim: int | None = None
) -> SequenceEncoder:
    """The encoder of ``config.architecture``'s registration (``edge_dim``: features per
    graph edge, which only ``graph`` reads).

    Raises:
        ValueError: the architecture has no encoder of its own (one line).
    """
    encoders = vector_encoders()
    if config.architecture not in encoders:
        raise ValueError(
            f"unknown architecture {config.architecture!r}; choose one of {', '.join(encoders)}"
        )
    encoder_type = encoders[config.architecture]
    if encoder_type is GraphSequenceEncoder:
        return encoder_type.from_config(config, max_len=max_len, edge_dim=edge_dim)
    return encoder_type.from_config(config, max_len=max_len)
