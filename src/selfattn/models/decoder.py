"""The Transformer decoder: a stack of decoder blocks (Vaswani et al. 2017, §3.1).

Each block attends to the encoder's output (the "memory"). Usually every block reads the
encoder's last layer; passing one memory per block lets block l read any encoder layer
instead (e.g. the matching one, or a mix chosen per layer).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from torch import Tensor, nn

from selfattn.attention.cache import DecoderCache
from selfattn.attention.normalizers import NormalizerFn
from selfattn.attention.scores import ScoreFn
from selfattn.blocks.decoder_block import DecoderBlock
from selfattn.blocks.feedforward import ActivationName
from selfattn.models.encoder import build_positionals, check_stack


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


class Decoder(nn.Module):
    """A stack of :class:`~selfattn.blocks.DecoderBlock`.

    Args:
        embed_dim: E.
        num_heads: H.
        num_layers: number of blocks (with ``share_weights``, of applications of one block).
        ffn_dim: hidden size of each feed-forward network.
        memory_dim: Em, feature size of the encoder memory (default E).
        positional: name of a positional encoding in
            :data:`selfattn.positional.POSITIONAL`, or ``None``. A relative encoding acts
            in the self-attention only.
        max_len: longest sequence the positional encoding must cover.
        positional_options: extra keyword arguments for the positional encoding.
        share_weights: one block applied ``num_layers`` times (Universal Transformer).
        final_norm: LayerNorm on the output; default: only for pre-LN blocks.
        embed_dropout: dropout on the input after positional encoding (default ``dropout``).
        dropout: dropout inside the blocks.
        activation: feed-forward activation (``"relu"``, ``"gelu"``, ``"swiglu"``).
        norm_first: pre-LN blocks instead of post-LN.
        layer_norm_eps: ε of every layer norm.
        bias: biases in linear layers and layer norms.
        score: attention score.
        normalizer: attention normaliser.
        num_kv_heads: key/value heads (grouped-query attention; default H).
        include_self: False forbids a position attending to itself in self-attention.
        attention_dropout: dropout on the weights of every attention (default ``dropout``).
            On CPU, PyTorch has no fused attention dropout: any value > 0 leaves the fused
            kernel for a slower path, so ``0`` with ``dropout`` elsewhere is the fast choice.
    """

    def __init__(
        self,
        embed_dim: int,
        num_heads: int,
        num_layers: int,
        ffn_dim: int,
        *,
        memory_dim: int | None = None,
        positional: str | None = None,
        max_len: int = 512,
        positional_options: Mapping[str, Any] | None = None,
        share_weights: bool = False,
        final_norm: bool | None = None,
        embed_dropout: float | None = None,
        dropout: float = 0.0,
        activation: ActivationName = "relu",
        norm_first: bool = False,
        layer_norm_eps: float = 1e-5,
        bias: bool = True,
        score: str | ScoreFn = "scaled_dot",
        normalizer: str | NormalizerFn = "softmax",
        num_kv_heads: int | None = None,
        include_self: bool = True,
        attention_dropout: float | None = None,
    ) -> None:
        super().__init__()
        check_stack(
            embed_dim=embed_dim,
            num_heads=num_heads,
            num_layers=num_layers,
            ffn_dim=ffn_dim,
            dropout=dropout,
            activation=activation,
            positional=positional,
        )
        if memory_dim is not None and memory_dim < 1:
            raise ValueError(f"memory_dim must be positive, got {memory_dim}")
        self.num_layers = num_layers
        num_blocks = 1 if share_weights else num_layers
        self.absolute, relatives = build_positionals(
            positional,
            embed_dim=embed_dim,
            num_heads=num_heads,
            max_len=max_len,
            num_relative=num_blocks,
            options=positional_options,
        )
        self.embed_dropout = nn.Dropout(dropout if embed_dropout is None else embed_dropout)
        blocks = [
            DecoderBlock(
                embed_dim,
                num_heads,
                ffn_dim,
                memory_dim=memory_dim,
                dropout=dropout,
                activation=activation,
                norm_first=norm_first,
                layer_norm_eps=layer_norm_eps,
                bias=bias,
                score=score,
                normalizer=normalizer,
                num_kv_heads=num_kv_heads,
                include_self=include_self,
                positional=relative,
                attention_dropout=attention_dropout,
            )
            for relative in relatives
        ]
        # A shared block appears num_layers times; parameters() still lists it once.
        self.layers = nn.ModuleList(blocks * num_layers if share_weights else blocks)
        if final_norm is None:
            final_norm = norm_first
        self.norm = nn.LayerNorm(embed_dim, eps=layer_norm_eps, bias=bias) if final_norm else None

    def forward(
        self,
        x: Tensor,
        memory: Tensor | Sequence[Tensor],
        *,
        self_key_padding_mask: Tensor | None = None,
        memory_key_padding_mask: Tensor | None = None,
        self_mask: Tensor | None = None,
        memory_mask: Tensor | None = None,
        causal: bool = True,
        need_weights: bool = False,
        cache: DecoderCache | None = None,
    ) -> DecoderOutput:
        """Args:
            x: ``(B, T, E)`` decoder input (already embedded).
            memory: the encoder output ``(B, S, Em)`` for every block, or a sequence of
                ``num_layers`` such tensors, block l attending to ``memory[l]``.
            self_key_padding_mask: ``(B, T)`` boolean, True at decoder padding.
            memory_key_padding_mask: ``(B, S)`` boolean, True at encoder padding.
            self_mask: extra self-attention mask (boolean, True = may attend, or additive),
                broadcastable to ``(B, H, T, T)``.
            memory_mask: extra cross-attention mask, broadcastable to ``(B, H, T, S)``.
            causal: mask the future in self-attention.
            need_weights: also return every block's attention weights.
            cache: incremental decoding: ``x`` holds only the positions after the
                ``cache.offset`` already decoded; keys and values of earlier positions
                come from the cache, which is extended (start with an empty
                :class:`~selfattn.attention.cache.DecoderCache`). The output equals the
                last positions of a full recomputation over the whole prefix.

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
        for index, (layer, layer_memory) in enumerate(zip(self.layers, memories, strict=True)):
            x, weights = layer(
                x,
                layer_memory,
                self_key_padding_mask=self_key_padding_mask,
                memory_key_padding_mask=memory_key_padding_mask,
                self_mask=self_mask,
                memory_mask=memory_mask,
                causal=causal,
                need_weights=need_weights,
                cache=None if cache is None else cache.layer(index),
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
