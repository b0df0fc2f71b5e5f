"""Blocks: the position-wise feed-forward network and the encoder and decoder blocks."""

from __future__ import annotations

from selfattn.blocks.decoder_block import DecoderBlock
from selfattn.blocks.encoder_block import EncoderBlock, add_and_norm, sublayer_input
from selfattn.blocks.feedforward import ACTIVATIONS, Activation, ActivationName, FeedForward

__all__ = [
    "ACTIVATIONS",
    "Activation",
    "ActivationName",
    "DecoderBlock",
    "EncoderBlock",
    "FeedForward",
    "add_and_norm",
    "sublayer_input",
]
