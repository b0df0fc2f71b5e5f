"""Blocks: the position-wise feed-forward network, the encoder, decoder and Conformer
blocks, and the one configuration they all take (:class:`BlockConfig`)."""

from __future__ import annotations

from selfattn.blocks.config import BlockConfig, ConvNormName
from selfattn.blocks.conformer import ConformerBlock
from selfattn.blocks.decoder_block import DecoderBlock, DecoderMaskArgs
from selfattn.blocks.encoder_block import EncoderBlock, ResidualBlock
from selfattn.blocks.feedforward import ACTIVATIONS, Activation, ActivationName, FeedForward

__all__ = [
    "ACTIVATIONS",
    "Activation",
    "ActivationName",
    "BlockConfig",
    "ConformerBlock",
    "ConvNormName",
    "DecoderBlock",
    "DecoderMaskArgs",
    "EncoderBlock",
    "FeedForward",
    "ResidualBlock",
]
