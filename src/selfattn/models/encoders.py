"""The interface every sequence encoder keeps, and what several of them share; each
architecture's own encoder lives in its file under :mod:`selfattn.models.architectures`.

Lecture 000 (§"Sequence Labeling"): to label a vector, a fully connected network can look
at that vector alone (``fc``) or at a window of its neighbours (``fc_window``, the HW2 "11
frames"); an RNN (``bigru``) or a CNN (``cnn``) sees further; self-attention
(``transformer``) lets every vector consider the whole sequence at once.

Every encoder maps ``(B, L, E)`` vectors and a ``(B, L)`` padding mask (True at padding)
to ``(B, L, output_dim)``, and padding never changes the outputs at real positions.
Padding is assumed to trail the real positions (the collator right-pads).
"""

from __future__ import annotations

import abc
from typing import TYPE_CHECKING, Any, ClassVar

from torch import Tensor, nn

from selfattn.models.act import AdaptiveDepth
from selfattn.models.config import StackConfig
from selfattn.models.encoder import BlockStack
from selfattn.models.option_groups import AttentionOptions

if TYPE_CHECKING:
    from selfattn.models.option_groups import EncoderOptions


class SequenceEncoder(nn.Module, abc.ABC):
    """The shared interface: ``forward(x (B, L, E), key_padding_mask (B, L)) → (B, L, E')``."""

    #: Its ``model.architecture`` name.
    name: ClassVar[str]
    #: E', the size of each output vector.
    output_dim: int

    @classmethod
    @abc.abstractmethod
    def from_config(cls, config: EncoderOptions, *, max_len: int = 512) -> SequenceEncoder:
        """The encoder described by ``config``, its architecture's options (``max_len``:
        longest sequence expected)."""

    @abc.abstractmethod
    def forward(self, x: Tensor, key_padding_mask: Tensor) -> Tensor:
        """``(B, L, E)`` vectors and ``(B, L)`` padding mask → ``(B, L, output_dim)``."""


def zero_padding(x: Tensor, key_padding_mask: Tensor) -> Tensor:
    """``x`` with padded positions set to 0, like the zeros beyond a sequence's edges."""
    return x.masked_fill(key_padding_mask[..., None], 0.0)


def mlp_layers(in_dim: int, hidden_dim: int, num_layers: int, dropout: float) -> nn.Sequential:
    layers: list[nn.Module] = []
    for i in range(num_layers):
        layers += [nn.Linear(in_dim if i == 0 else hidden_dim, hidden_dim), nn.ReLU()]
        layers.append(nn.Dropout(dropout))
    return nn.Sequential(*layers)


#: What a stack gets for a choice its architecture does not offer: a graph encoder has
#: the attention group's defaults (dense softmax of scaled dot products) and no positions;
#: a Conformer is pre-normalised; only a Conformer has a convolution (``window_k``).
_STACK_DEFAULTS = {
    **{
        name: getattr(AttentionOptions(), name)
        for name in ("attention", "attention_dropout", "score", "normalizer")
    },
    "positional": None,
    "norm_first": True,
    "window_k": 5,
}


def stack_config(config: EncoderOptions, *, max_len: int = 512) -> StackConfig:
    """The stack ``config`` describes, for a transformer, a Conformer or a graph encoder
    (``max_len``: longest sequence expected). The Conformer's depthwise convolutions get
    kernel ``2·window_k + 1``."""

    def read(name: str) -> Any:
        if name in _STACK_DEFAULTS:
            return getattr(config, name, _STACK_DEFAULTS[name])
        return getattr(config, name)  # every attention stack's (heads, include_self, …)

    attention = config.attention_options() if isinstance(config, AttentionOptions) else {}
    return StackConfig(
        config.embed_dim,
        read("num_heads"),
        config.ffn_dim,
        dropout=config.dropout,
        attention_dropout=read("attention_dropout"),
        ffn_dropout=read("ffn_dropout"),
        norm_first=read("norm_first"),
        score=read("score"),
        normalizer=read("normalizer"),
        include_self=read("include_self"),
        attention=read("attention"),
        attention_options=attention,
        conv_kernel_size=2 * read("window_k") + 1,
        num_layers=config.num_layers,
        positional=read("positional"),
        max_len=max_len,
        share_weights=read("share_weights"),
    )


class AttentionSequenceEncoder(SequenceEncoder):
    """A stack of attention blocks as a sequence encoder: each output sees every real
    input (within its attention kernel's pattern).

    Args:
        config: the stack's whole configuration.
        halting: ``"act"``: the shared-weight stack runs with adaptive depth
            (:class:`~selfattn.models.act.AdaptiveDepth`, ``model.halting``).
        ponder_weight: with ``"act"``, the ponder cost's weight in the loss.
    """

    #: The stack it wraps.
    stack_type: ClassVar[type[BlockStack]]

    def __init__(
        self, config: StackConfig, *, halting: str = "none", ponder_weight: float = 0.01
    ) -> None:
        super().__init__()
        self.output_dim = config.embed_dim
        stack = self.stack_type(config)
        self.encoder: BlockStack | AdaptiveDepth = (
            AdaptiveDepth(stack, ponder_weight=ponder_weight) if halting == "act" else stack
        )

    @classmethod
    def from_config(cls, config: EncoderOptions, *, max_len: int = 512) -> SequenceEncoder:
        assert isinstance(config, AttentionOptions), "an attention stack's architecture"
        return cls(
            stack_config(config, max_len=max_len),
            halting=config.halting,
            ponder_weight=config.ponder_weight,
        )

    def forward(self, x: Tensor, key_padding_mask: Tensor) -> Tensor:
        return self.encoder(x, key_padding_mask=key_padding_mask).last_hidden_state

    def attention_maps(self, x: Tensor, key_padding_mask: Tensor) -> list[Tensor]:
        """Every block's attention weights, ``num_layers`` tensors ``(B, H, L, L)``.

        Raises:
            ValueError: the attention kernel forms no attention matrix (its own one-line
                refusal).
        """
        out = self.encoder(x, key_padding_mask=key_padding_mask, need_weights=True)
        assert out.attentions is not None
        return out.attentions
