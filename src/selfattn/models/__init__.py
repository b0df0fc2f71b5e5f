"""Models: stacks of blocks — the Transformer encoder and decoder, the Conformer."""

from __future__ import annotations

from selfattn.models.conformer import Conformer
from selfattn.models.decoder import Decoder, DecoderOutput
from selfattn.models.encoder import Encoder, EncoderOutput

__all__ = ["Conformer", "Decoder", "DecoderOutput", "Encoder", "EncoderOutput"]
