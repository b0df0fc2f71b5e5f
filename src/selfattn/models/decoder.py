"""The Transformer decoder: a stack of decoder blocks (Vaswani et al. 2017, §3.1).

Each block attends to the encoder's output (the "memory"). Usually every block reads the
encoder's last layer; passing one memory per block lets block l read any encoder layer
instead (e.g. the matching one, or a mix chosen per layer).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Unpack

from torch import Tensor

from selfattn.attention.alignment import AlignmentConfig
from selfattn.attention.cache import DecoderCache
from selfattn.blocks.decoder_block import DecoderBlock, DecoderMaskArgs
from selfattn.models.checkpointing import run_block
from selfattn.models.config import StackConfig
from selfattn.models.encoder import LayerStack


@dataclass
class DecoderOutput:
    """What :class:`Decoder` returns.

    Attributes:
        last_hidden_state: ``(B, T, E)``, the decoder's output.
        hidden_states: ``num_layers + 1`` tensors ``(B, T, E)``: the input after positional
            encoding (and embedding dropout), then each block's output; the last one is
            ``last_hidden_state`` (after the final norm, when there is one).
        self_attentions: per block, self-attention weights ``(B, H, T, T)``, or ``None``.
        cross_attentions: per block, cross-attention weights ``(B, H, T, S)``, or ``None``.
    """

    last_hidden_state: Tensor
    hidden_states: list[Tensor]
    self_attentions: list[Tensor] | None = None
    cross_attentions: list[Tensor] | None = None


class Decoder(LayerStack):
    """A stack of :class:`~selfattn.blocks.DecoderBlock`.

    Args:
        config: every option of the stack and its blocks. A relative positional
            encoding acts in the self-attention only; ``config.attention`` must be
            ``"dense"`` (incremental decoding keeps a KV cache).
        memory_dim: Em, feature size of the encoder memory (default E).
        alignment: every block's cross-attention alignment (default ``content``);
            with ``share_weights`` the shared block keeps one alignment per application.

    Attributes:
        checkpoint_activations: as :class:`~selfattn.models.encoder.LayerStack`'s, but never
            with a KV cache.
    """

    def __init__(
        self,
        config: StackConfig,
        *,
        memory_dim: int | None = None,
        alignment: AlignmentConfig | None = None,
    ) -> None:
        super().__init__(
            config,
            lambda _, relative: DecoderBlock(
                config, memory_dim=memory_dim, positional=relative, alignment=alignment
            ),
        )

    def forward(
        self,
        x: Tensor,
        memory: Tensor | Sequence[Tensor],
        *,
        need_weights: bool = False,
        cache: DecoderCache | None = None,
        **masks: Unpack[DecoderMaskArgs],
    ) -> DecoderOutput:
        """Args:
            x: ``(B, T, E)`` decoder input (already embedded).
            memory: the encoder output ``(B, S, Em)`` for every block, or a sequence of
                ``num_layers`` such tensors, block l attending to ``memory[l]``.
            need_weights: also return every block's attention weights.
            cache: incremental decoding: ``x`` holds only the positions after the
                ``cache.offset`` already decoded; keys and values of earlier positions
                come from the cache, which is extended (start with an empty
                :class:`~selfattn.attention.cache.DecoderCache`). The output equals the
                last positions of a full recomputation over the whole prefix.
            **masks: which positions the queries may see, the same in every block
                (:class:`~selfattn.blocks.DecoderMaskArgs`: ``self_key_padding_mask``,
                ``memory_key_padding_mask``, ``self_mask``, ``memory_mask``, ``causal``).

        Returns:
            A :class:`DecoderOutput`.
        """
        memories = self._per_layer(memory)
        offset = 0 if cache is None else cache.offset
        if self.absolute is not None:
            x = self.absolute(x, offset)
        x = self.embed_dropout(x)
        hidden_states = [x]
        self_attentions: list[Tensor] = []
        cross_attentions: list[Tensor] = []
        # Incremental decoding extends its cache in place: never recomputed.
        stack = self if cache is None else None
        for index, (layer, layer_memory) in enumerate(zip(self.layers, memories, strict=True)):
            x, weights = run_block(
                stack,
                layer,
                x,
                layer_memory,
                need_weights=need_weights,
                cache=None if cache is None else cache.layer(index),
                **masks,
            )
            hidden_states.append(x)
            if weights is not None:
                self_attentions.append(weights[0])
                cross_attentions.append(weights[1])
        if self.norm is not None:
            x = self.norm(x)
            hidden_states[-1] = x
        if cache is not None:
            cache.offset += x.shape[1]
        if not need_weights:
            return DecoderOutput(x, hidden_states)
        return DecoderOutput(x, hidden_states, self_attentions, cross_attentions)

    def _per_layer(self, memory: Tensor | Sequence[Tensor]) -> list[Tensor]:
        """One memory tensor per block."""
        if isinstance(memory, Tensor):
            return [memory] * self.num_layers
        memories = list(memory)
        if len(memories) != self.num_layers:
            raise ValueError(
                f"memory is a list of {len(memories)} tensors but the decoder has "
                f"{self.num_layers} layers; pass one tensor per layer or a single tensor"
            )
        return memories
