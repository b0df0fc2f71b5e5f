"""Sequence encoders, selected by name: self-attention and the lecture's baselines.

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
from dataclasses import replace
from typing import ClassVar

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from selfattn.models.act import AdaptiveDepth
from selfattn.models.config import StackConfig
from selfattn.models.conformer import Conformer
from selfattn.models.encoder import BlockStack, Encoder
from selfattn.models.graph import GraphTransformer
from selfattn.models.options import ModelConfig
from selfattn.models.recurrent import bidirectional_rnn, run_packed


class SequenceEncoder(nn.Module, abc.ABC):
    """The shared interface: ``forward(x (B, L, E), key_padding_mask (B, L)) → (B, L, E')``."""

    #: Its ``model.architecture`` name.
    name: ClassVar[str]
    #: E', the size of each output vector.
    output_dim: int

    @classmethod
    @abc.abstractmethod
    def from_config(cls, config: ModelConfig, *, max_len: int = 512) -> SequenceEncoder:
        """The encoder described by ``config`` (``max_len``: longest sequence expected)."""

    @abc.abstractmethod
    def forward(self, x: Tensor, key_padding_mask: Tensor) -> Tensor:
        """``(B, L, E)`` vectors and ``(B, L)`` padding mask → ``(B, L, output_dim)``."""


def _zero_padding(x: Tensor, key_padding_mask: Tensor) -> Tensor:
    """``x`` with padded positions set to 0, like the zeros beyond a sequence's edges."""
    return x.masked_fill(key_padding_mask[..., None], 0.0)


def _mlp(in_dim: int, hidden_dim: int, num_layers: int, dropout: float) -> nn.Sequential:
    layers: list[nn.Module] = []
    for i in range(num_layers):
        layers += [nn.Linear(in_dim if i == 0 else hidden_dim, hidden_dim), nn.ReLU()]
        layers.append(nn.Dropout(dropout))
    return nn.Sequential(*layers)


def stack_config(config: ModelConfig, *, max_len: int = 512) -> StackConfig:
    """The stack ``config`` describes, for a transformer, a Conformer or a graph encoder
    (``max_len``: longest sequence expected). The Conformer's depthwise convolutions get
    kernel ``2·window_k + 1``."""
    return StackConfig(
        config.embed_dim,
        config.num_heads,
        config.ffn_dim,
        dropout=config.dropout,
        attention_dropout=config.attention_dropout,
        ffn_dropout=config.ffn_dropout,
        norm_first=config.norm_first,
        score=config.score,
        normalizer=config.normalizer,
        include_self=config.include_self,
        attention=config.attention,
        attention_options=config.attention_options(),
        conv_kernel_size=2 * config.window_k + 1,
        num_layers=config.num_layers,
        positional=config.positional,
        max_len=max_len,
        share_weights=config.share_weights,
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
    def from_config(cls, config: ModelConfig, *, max_len: int = 512) -> SequenceEncoder:
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


class TransformerSequenceEncoder(AttentionSequenceEncoder):
    """selfattn's :class:`~selfattn.models.Encoder`."""

    name = "transformer"

    stack_type = Encoder


class FCEncoder(SequenceEncoder):
    """An MLP applied to each vector alone: it cannot use context at all.

    Args:
        embed_dim: E.
        hidden_dim: width of each layer (and E').
        num_layers: Linear → ReLU → dropout layers.
        dropout: on the input and after each layer.
    """

    name = "fc"

    def __init__(self, embed_dim: int, hidden_dim: int, num_layers: int, dropout: float = 0.0):
        super().__init__()
        self.output_dim = hidden_dim
        self.input_dropout = nn.Dropout(dropout)
        self.mlp = _mlp(embed_dim, hidden_dim, num_layers, dropout)

    @classmethod
    def from_config(cls, config: ModelConfig, *, max_len: int = 512) -> SequenceEncoder:
        return cls(config.embed_dim, config.ffn_dim, config.num_layers, config.dropout)

    def forward(self, x: Tensor, key_padding_mask: Tensor) -> Tensor:
        return self.mlp(self.input_dropout(x))


class WindowFCEncoder(SequenceEncoder):
    """An MLP on the concatenation of each vector and its ±k neighbours (zeros past the ends).

    Args:
        embed_dim: E.
        hidden_dim: width of each layer (and E').
        num_layers: Linear → ReLU → dropout layers.
        k: half-width of the window, which holds 2k + 1 vectors.
        dropout: on the input and after each layer.
    """

    name = "fc_window"

    def __init__(
        self, embed_dim: int, hidden_dim: int, num_layers: int, k: int, dropout: float = 0.0
    ) -> None:
        super().__init__()
        self.k = k
        self.output_dim = hidden_dim
        self.input_dropout = nn.Dropout(dropout)
        self.mlp = _mlp((2 * k + 1) * embed_dim, hidden_dim, num_layers, dropout)

    @classmethod
    def from_config(cls, config: ModelConfig, *, max_len: int = 512) -> SequenceEncoder:
        return cls(
            config.embed_dim, config.ffn_dim, config.num_layers, config.window_k, config.dropout
        )

    def forward(self, x: Tensor, key_padding_mask: Tensor) -> Tensor:
        x = _zero_padding(self.input_dropout(x), key_padding_mask)
        padded = F.pad(x, (0, 0, self.k, self.k))  # (B, L + 2k, E)
        windows = padded.unfold(1, 2 * self.k + 1, 1)  # (B, L, E, 2k + 1)
        return self.mlp(windows.transpose(2, 3).flatten(2))  # (B, L, (2k + 1)·E) → (B, L, E')


class BiGRUEncoder(SequenceEncoder):
    """A bidirectional GRU over the real positions only (packed sequences).

    Args:
        embed_dim: E.
        hidden_dim: E', split evenly between the two directions (must be even).
        num_layers: stacked GRU layers.
        dropout: on the input and between layers.
    """

    name = "bigru"

    def __init__(self, embed_dim: int, hidden_dim: int, num_layers: int, dropout: float = 0.0):
        super().__init__()
        if hidden_dim % 2:
            raise ValueError(f"bigru needs an even hidden size (ffn_dim), got {hidden_dim}")
        self.output_dim = hidden_dim
        self.input_dropout = nn.Dropout(dropout)
        self.gru = bidirectional_rnn(nn.GRU, embed_dim, hidden_dim, num_layers, dropout)

    @classmethod
    def from_config(cls, config: ModelConfig, *, max_len: int = 512) -> SequenceEncoder:
        return cls(config.embed_dim, config.ffn_dim, config.num_layers, config.dropout)

    def forward(self, x: Tensor, key_padding_mask: Tensor) -> Tensor:
        lengths = (~key_padding_mask).sum(dim=1)
        positions = torch.arange(x.shape[1], device=x.device)
        if not torch.equal(key_padding_mask, positions >= lengths[:, None]):
            raise ValueError("bigru needs right-padded sequences (padding after the tokens)")
        # Packed sequences want lengths ≥ 1; an all-padding row stays zero.
        out = run_packed(self.gru, self.input_dropout(x), lengths.clamp(min=1))
        return _zero_padding(out, key_padding_mask)


class CNNEncoder(SequenceEncoder):
    """Stacked 1-D convolutions with "same" padding; padding is zeroed before each one.

    Zeroing the padded positions makes them look exactly like the zeros beyond the end of
    a sequence, so no amount of padding changes what a real position sees.

    Args:
        embed_dim: E.
        hidden_dim: channels of each convolution (and E').
        num_layers: Conv → ReLU → dropout layers.
        k: kernel half-width (kernel size 2k + 1).
        dropout: on the input and after each layer.
    """

    name = "cnn"

    def __init__(
        self, embed_dim: int, hidden_dim: int, num_layers: int, k: int, dropout: float = 0.0
    ) -> None:
        super().__init__()
        self.output_dim = hidden_dim
        self.input_dropout = nn.Dropout(dropout)
        self.convs = nn.ModuleList(
            nn.Conv1d(embed_dim if i == 0 else hidden_dim, hidden_dim, 2 * k + 1, padding=k)
            for i in range(num_layers)
        )
        self.dropout = nn.Dropout(dropout)

    @classmethod
    def from_config(cls, config: ModelConfig, *, max_len: int = 512) -> SequenceEncoder:
        return cls(
            config.embed_dim, config.ffn_dim, config.num_layers, config.window_k, config.dropout
        )

    def forward(self, x: Tensor, key_padding_mask: Tensor) -> Tensor:
        x = self.input_dropout(x)
        for conv in self.convs:
            x = _zero_padding(x, key_padding_mask)
            x = self.dropout(torch.relu(conv(x.transpose(1, 2)).transpose(1, 2)))  # (B, L, E')
        return _zero_padding(x, key_padding_mask)


class ConformerSequenceEncoder(AttentionSequenceEncoder):
    """A :class:`~selfattn.models.Conformer` (Gulati et al. 2020): self-attention for the
    whole sequence plus a depthwise convolution of kernel ``2·window_k + 1`` in every block —
    the lecture's hint for speech ("you can also use both")."""

    name = "conformer"

    stack_type = Conformer


class GraphSequenceEncoder(SequenceEncoder):
    """A :class:`~selfattn.models.graph.GraphTransformer`: each node attends to its graph
    neighbours and itself (the batch's ``edge_index``, with ``edge_dim`` features per edge);
    without edges, to every real node of its set. It uses no positions."""

    name = "graph"

    def __init__(self, config: ModelConfig, *, edge_dim: int | None = None) -> None:
        super().__init__()
        self.output_dim = config.embed_dim
        # A graph is a set: ModelConfig leaves positional at its default or none for it.
        stack = replace(stack_config(config), positional=None)
        self.encoder = GraphTransformer(stack, edge_dim=edge_dim)

    @classmethod
    def from_config(
        cls, config: ModelConfig, *, max_len: int = 512, edge_dim: int | None = None
    ) -> SequenceEncoder:
        return cls(config, edge_dim=edge_dim)

    def forward(
        self,
        x: Tensor,
        key_padding_mask: Tensor,
        edge_index: Tensor | None = None,
        edge_attr: Tensor | None = None,
    ) -> Tensor:
        return self.encoder(x, key_padding_mask, edge_index, edge_attr)

    def attention_maps(
        self,
        x: Tensor,
        key_padding_mask: Tensor,
        edge_index: Tensor | None = None,
        edge_attr: Tensor | None = None,
    ) -> list[Tensor]:
        """Node × node maps per block, ``(B, H, L, L)``, zero off the graph's edges."""
        return self.encoder.attention_maps(x, key_padding_mask, edge_index, edge_attr)


#: Every encoder by name; the contract tests iterate over it.
ENCODERS: dict[str, type[SequenceEncoder]] = {
    encoder.name: encoder
    for encoder in (
        TransformerSequenceEncoder,
        FCEncoder,
        WindowFCEncoder,
        BiGRUEncoder,
        CNNEncoder,
        ConformerSequenceEncoder,
        GraphSequenceEncoder,
    )
}


def build_encoder(
    config: ModelConfig, *, max_len: int = 512, edge_dim: int | None = None
) -> SequenceEncoder:
    """The encoder named ``config.architecture`` (``edge_dim``: features per graph edge,
    for ``graph``)."""
    if config.architecture == "graph":
        return GraphSequenceEncoder.from_config(config, max_len=max_len, edge_dim=edge_dim)
    if config.architecture not in ENCODERS:
        raise ValueError(
            f"unknown architecture {config.architecture!r}; choose one of {', '.join(ENCODERS)}"
        )
    return ENCODERS[config.architecture].from_config(config, max_len=max_len)
