"""Models: stacks of blocks — the Transformer encoder and decoder."""

from __future__ import annotations

from selfattn.models.decoder import Decoder, DecoderOutput
from selfattn.models.encoder import Encoder, EncoderOutput

__all__ = ["Decoder", "DecoderOutput", "Encoder", "EncoderOutput"]
