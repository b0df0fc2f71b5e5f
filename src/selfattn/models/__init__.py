"""Models: stacks of blocks — the Transformer encoder and decoder, the Conformer — and the
one configuration a stack takes (:class:`StackConfig`)."""

from __future__ import annotations

from selfattn.models.config import StackConfig
from selfattn.models.conformer import Conformer
from selfattn.models.decoder import Decoder, DecoderOutput
from selfattn.models.encoder import BlockStack, Encoder, EncoderOutput

__all__ = [
    "BlockStack",
    "Conformer",
    "Decoder",
    "DecoderOutput",
    "Encoder",
    "EncoderOutput",
    "StackConfig",
]
