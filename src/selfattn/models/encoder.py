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
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from torch import Tensor, nn

from selfattn.attention.normalizers import NormalizerFn
from selfattn.attention.scores import ScoreFn
from selfattn.blocks.encoder_block import EncoderBlock
from selfattn.blocks.feedforward import ActivationName, check_activation
from selfattn.kernels.base import KERNELS, build_kernel
from selfattn.positional import POSITIONAL, build_positional
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


def check_stack(
    *,
    embed_dim: int,
    num_heads: int,
    num_layers: int,
    ffn_dim: int,
    dropout: float,
    activation: str,
    positional: str | None,
) -> None:
    """Reject a bad encoder/decoder configuration up-front, with one-line errors."""
    if embed_dim < 1 or num_heads < 1 or ffn_dim < 1:
        raise ValueError(
            f"embed_dim, num_heads and ffn_dim must be positive, "
            f"got {embed_dim}, {num_heads} and {ffn_dim}"
        )
    if embed_dim % num_heads:
        raise ValueError(f"embed_dim ({embed_dim}) must be divisible by num_heads ({num_heads})")
    if num_layers < 1:
        raise ValueError(f"num_layers must be >= 1, got {num_layers}")
    if not 0.0 <= dropout < 1.0:
        raise ValueError(f"dropout must be in [0, 1), got {dropout}")
    check_activation(activation)
    if positional is not None and positional not in POSITIONAL:
        raise ValueError(
            f"unknown positional encoding {positional!r}; choose one of "
            f"{sorted(POSITIONAL)} or None"
        )


def build_positionals(
    name: str | None,
    *,
    embed_dim: int,
    num_heads: int,
    max_len: int,
    num_relative: int,
    options: Mapping[str, Any] | None = None,
) -> tuple[AbsolutePositional | None, list[RelativePositional | None]]:
    """The positional encoding called ``name``, in the form a stack of blocks uses it.

    Returns:
        ``(absolute, relatives)``: an absolute encoding to add to the input (else
        ``None``), and ``num_relative`` independent relative encodings, one per block
        (``None`` each when the encoding is absolute or ``name`` is ``None``).
    """
    if name is None:
        return None, [None] * num_relative

    def build() -> nn.Module:
        return build_positional(
            name, embed_dim=embed_dim, num_heads=num_heads, max_len=max_len, **(options or {})
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


class Encoder(nn.Module):
    """A stack of :class:`~selfattn.blocks.EncoderBlock` over a set or sequence of vectors.

    Args:
        embed_dim: E.
        num_heads: H.
        num_layers: number of blocks (with ``share_weights``, of applications of one block).
        ffn_dim: hidden size of each feed-forward network.
        positional: name of a positional encoding in
            :data:`selfattn.positional.POSITIONAL`, or ``None`` for none (the encoder is
            then permutation-equivariant: a set encoder).
        max_len: longest sequence the positional encoding must cover.
        positional_options: extra keyword arguments for the positional encoding.
        share_weights: Universal Transformer: one block, applied ``num_layers`` times.
        final_norm: LayerNorm on the output; default: only for pre-LN blocks, whose
            outputs are otherwise un-normalised.
        embed_dropout: dropout on the input after positional encoding (default
            ``dropout``, as in the paper).
        dropout: dropout inside the blocks.
        activation: feed-forward activation (``"relu"``, ``"gelu"``, ``"swiglu"``).
        norm_first: pre-LN blocks instead of post-LN.
        layer_norm_eps: ε of every layer norm.
        bias: biases in linear layers and layer norms.
        score: attention score.
        normalizer: attention normaliser.
        num_kv_heads: key/value heads (grouped-query attention; default H).
        include_self: False forbids each position attending to itself.
        attention: the attention variant of every block, a key of
            :data:`selfattn.kernels.KERNELS` (``"dense"``: the fused softmax kernel;
            ``"window"``, ``"linear"``, ``"performer"``, ``"linformer"``, ``"lsh"``, …).
        attention_options: the variant's options (e.g. ``{"window": 256}``); each block
            gets its own kernel (Linformer's projections, Performer's features).
        attention_dropout: dropout on the attention weights alone (default ``dropout``).
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
        attention: str = "dense",
        attention_options: Mapping[str, Any] | None = None,
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
            EncoderBlock(
                embed_dim,
                num_heads,
                ffn_dim,
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
                kernel=block_kernel(
                    attention, attention_options, embed_dim // num_heads, max_len, index
                ),
                attention_dropout=attention_dropout,
            )
            for index, relative in enumerate(relatives)
        ]
        # A shared block appears num_layers times; parameters() still lists it once.
        self.layers = nn.ModuleList(blocks * num_layers if share_weights else blocks)
        if final_norm is None:
            final_norm = norm_first
        self.norm = nn.LayerNorm(embed_dim, eps=layer_norm_eps, bias=bias) if final_norm else None

    def forward(
        self,
        x: Tensor,
        *,
        key_padding_mask: Tensor | None = None,
        mask: Tensor | None = None,
        causal: bool = False,
        window: int | None = None,
        need_weights: bool = False,
    ) -> EncoderOutput:
        """Args:
            x: ``(B, L, E)`` input vectors (already embedded).
            key_padding_mask: ``(B, L)`` boolean, True at padding.
            mask: boolean (True = may attend) or additive mask broadcastable to
                ``(B, H, L, L)``, e.g. a graph's adjacency; the same in every block.
            causal: each position sees only itself and earlier ones.
            window: truncated attention to |i − j| ≤ ``window`` in every block.
            need_weights: also return every block's attention weights.

        Returns:
            An :class:`EncoderOutput`.
        """
        x, hidden_states, attentions = run_blocks(
            x,
            self.layers,
            self.absolute,
            self.embed_dropout,
            key_padding_mask=key_padding_mask,
            mask=mask,
            causal=causal,
            window=window,
            need_weights=need_weights,
        )
        if self.norm is not None:
            x = self.norm(x)
            hidden_states[-1] = x
        return EncoderOutput(x, hidden_states, attentions if need_weights else None)


def block_kernel(
    name: str, options: Mapping[str, Any] | None, head_dim: int, max_len: int, index: int
) -> nn.Module | None:
    """Block ``index``'s attention kernel; ``None`` for the built-in dense path (which also
    serves masks, attention maps and the KV cache). Kernels with random projections
    (Performer, LSH) get a different seed per block unless one is given."""
    if name == "dense" and not options:
        return None
    options = dict(options or {})
    if name in KERNELS and "seed" in inspect.signature(KERNELS[name].__init__).parameters:
        options.setdefault("seed", index)
    return build_kernel(name, head_dim=head_dim, max_len=max_len, **options)


def run_blocks(
    x: Tensor,
    layers: nn.ModuleList,
    absolute: nn.Module | None,
    embed_dropout: nn.Module,
    **block_options: Any,
) -> tuple[Tensor, list[Tensor], list[Tensor]]:
    """Absolute positions, embedding dropout, then every block of ``layers``: the
    last output, every hidden state (input first) and every block's attention weights.
    Shared by :class:`Encoder` and :class:`~selfattn.models.conformer.Conformer`."""
    if absolute is not None:
        x = absolute(x)
    x = embed_dropout(x)
    hidden_states = [x]
    attentions: list[Tensor] = []
    for layer in layers:
        x, weights = layer(x, **block_options)
        hidden_states.append(x)
        if weights is not None:
            attentions.append(weights)
    return x, hidden_states, attentions
