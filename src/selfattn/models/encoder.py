"""The Transformer encoder: a stack of encoder blocks (Vaswani et al. 2017, §3.1).

Positional information enters in one of two places (lecture 000, §Positional Encoding):
an *absolute* encoding is added to the input once, before the first block; a *relative*
one acts inside every block's attention, one instance per block.

With ``share_weights=True`` the stack is a Universal Transformer (Dehghani et al. 2019,
without adaptive halting or per-step time signals): one block applied ``num_layers``
times, so depth costs compute but no parameters.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Unpack

from torch import Tensor, nn

from selfattn.attention.masks import MaskArgs
from selfattn.blocks.encoder_block import EncoderBlock, layer_norm
from selfattn.kernels.base import KERNELS, build_kernel
from selfattn.models.checkpointing import run_block
from selfattn.models.config import StackConfig
from selfattn.positional import build_positional
from selfattn.positional.base import AbsolutePositional, RelativePositional


@dataclass
class EncoderOutput:
    """What :class:`Encoder` returns.

    Attributes:
        last_hidden_state: ``(B, L, E)``, the encoder's output.
        hidden_states: ``num_layers + 1`` tensors ``(B, L, E)``: the input after positional
            encoding (and embedding dropout), then each block's output. The last one is
            ``last_hidden_state`` (after the final norm, when there is one).
        attentions: per block, weights ``(B, H, L, L)``; ``None`` unless requested.
    """

    last_hidden_state: Tensor
    hidden_states: list[Tensor]
    attentions: list[Tensor] | None = None


def build_positionals(
    config: StackConfig, num_relative: int
) -> tuple[AbsolutePositional | None, list[RelativePositional | None]]:
    """The positional encoding ``config.positional``, in the form a stack of blocks uses it.

    Returns:
        ``(absolute, relatives)``: an absolute encoding to add to the input (else
        ``None``), and ``num_relative`` independent relative encodings, one per block
        (``None`` each when the encoding is absolute or there is none).
    """
    name = config.positional
    if name is None:
        return None, [None] * num_relative

    def build() -> nn.Module:
        return build_positional(
            name,
            embed_dim=config.embed_dim,
            num_heads=config.num_heads,
            max_len=config.max_len,
            **config.positional_options,
        )

    first = build()
    if isinstance(first, AbsolutePositional):
        return first, [None] * num_relative
    relatives: list[RelativePositional | None] = []
    for encoding in [first, *(build() for _ in range(num_relative - 1))]:
        if not isinstance(encoding, RelativePositional):
            raise TypeError(f"positional {name!r} built a {type(encoding).__name__}")
        relatives.append(encoding)
    return None, relatives


def distinct_blocks(config: StackConfig) -> int:
    """How many blocks with parameters of their own a stack has: one shared block with
    ``config.share_weights``, else one per layer."""
    return 1 if config.share_weights else config.num_layers


def stack_layers(config: StackConfig, make_block: Callable[[int], nn.Module]) -> nn.ModuleList:
    """The stack's ``num_layers`` layers: block ``make_block(index)`` for each of the
    :func:`distinct_blocks`, a shared one repeated ``num_layers`` times."""
    blocks = [make_block(index) for index in range(distinct_blocks(config))]
    # A shared block appears num_layers times; parameters() still lists it once.
    return nn.ModuleList(blocks * config.num_layers if config.share_weights else blocks)


class LayerStack(nn.Module):
    """Positions, then ``num_layers`` blocks, then an optional final norm: how the encoder
    stacks (:class:`BlockStack`) and the :class:`~selfattn.models.Decoder` are built.

    Args:
        config: the stack's options; every block receives it whole.
        make_block: block ``index`` of the :func:`distinct_blocks`, given its own relative
            positional encoding (``None`` when the encoding is absolute or there is none).

    Attributes:
        checkpoint_activations: recompute each block's activations in the backward pass
            instead of storing them (:mod:`selfattn.models.checkpointing`); off by default.
    """

    checkpoint_activations: bool = False

    def __init__(
        self, config: StackConfig, make_block: Callable[[int, RelativePositional | None], nn.Module]
    ) -> None:
        super().__init__()
        self.config = config
        self.num_layers = config.num_layers
        self.absolute, relatives = build_positionals(config, distinct_blocks(config))
        self.embed_dropout = nn.Dropout(config.input_dropout)
        self.layers = stack_layers(config, lambda index: make_block(index, relatives[index]))
        self.norm = layer_norm(config) if self.has_final_norm() else None

    def has_final_norm(self) -> bool:
        """Whether the stack normalises its output (``config.final_norm``, else after
        pre-LN blocks)."""
        return self.config.has_final_norm


class BlockStack(LayerStack):
    """A stack of self-attention blocks of one kind: what :class:`Encoder` and
    :class:`~selfattn.models.Conformer` share.

    Args:
        config: the stack's options; every block receives it whole, with its own relative
            positional encoding and attention kernel (Linformer's projections,
            Performer's features are per block; a shared block shares them).
    """

    #: The class of the blocks, built as ``block_type(config, positional=…, kernel=…)``.
    block_type: ClassVar[type[nn.Module]]

    def __init__(self, config: StackConfig) -> None:
        super().__init__(config, self.make_block)

    def make_block(self, index: int, positional: RelativePositional | None) -> nn.Module:
        """Block ``index`` of the stack, with its attention kernel."""
        config = self.config
        kernel = block_kernel(
            config.attention, config.kernel_options(), config.head_dim, config.max_len, index
        )
        return self.block_type(config, positional=positional, kernel=kernel)

    def forward(
        self,
        x: Tensor,
        *,
        need_weights: bool = False,
        **masks: Unpack[MaskArgs],
    ) -> EncoderOutput:
        """Args:
            x: ``(B, L, E)`` input vectors (already embedded).
            need_weights: also return every block's attention weights.
            **masks: which keys each position may see, the same in every block
                (:class:`~selfattn.attention.MaskArgs`: ``key_padding_mask``, ``mask``,
                ``causal``, ``window``).

        Returns:
            An :class:`EncoderOutput`.
        """
        if self.absolute is not None:
            x = self.absolute(x)
        x = self.embed_dropout(x)
        hidden_states = [x]
        attentions: list[Tensor] = []
        for layer in self.layers:
            x, weights = run_block(self, layer, x, need_weights=need_weights, **masks)
            hidden_states.append(x)
            if weights is not None:
                attentions.append(weights)
        if self.norm is not None:
            x = self.norm(x)
            hidden_states[-1] = x
        return EncoderOutput(x, hidden_states, attentions if need_weights else None)


class Encoder(BlockStack):
    """A stack of :class:`~selfattn.blocks.EncoderBlock` over a set or sequence of vectors.

    Args:
        config: every option of the stack and its blocks, e.g.
            ``StackConfig(256, 4, 1024, num_layers=6, positional="rotary")``; the
            attention variant of every block is ``config.attention`` (``"dense"``: the
            fused softmax kernel; ``"window"``, ``"linear"``, ``"performer"``, …) with
            ``config.attention_options`` (e.g. ``{"window": 256}``).
    """

    block_type = EncoderBlock


def block_kernel(
    name: str, options: Mapping[str, Any] | None, head_dim: int, max_len: int, index: int
) -> nn.Module | None:
    """Block ``index``'s attention kernel. ``None`` for plain ``"dense"``: the block's
    :class:`~selfattn.attention.MultiHeadAttention` then builds its
    :class:`~selfattn.kernels.DenseKernel` with the block's attention dropout, which this
    function does not see. Kernels with random projections (Performer, LSH) get a
    different seed per block unless one is given."""
    if name == "dense" and not options:
        return None
    options = dict(options or {})
    if name in KERNELS and "seed" in inspect.signature(KERNELS[name].__init__).parameters:
        options.setdefault("seed", index)
    return build_kernel(name, head_dim=head_dim, max_len=max_len, **options)
