"""One block configuration, passed whole to every block and stack.

Every option of an encoder, decoder or Conformer block lives in one frozen dataclass, so
a stack hands it down unchanged instead of copying a keyword list through each layer
(nanoGPT's ``GPTConfig``, litgpt's ``Config``). Each field is checked once, here, with a
one-line error naming it.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from selfattn.attention.normalizers import NORMALIZERS, NormalizerFn
from selfattn.attention.scores import SCORES, ScoreFn
from selfattn.blocks.feedforward import ActivationName, check_activation
from selfattn.kernels import KERNELS

__all__ = ["BlockConfig", "ConvNormName"]

#: Normalisation after the Conformer's depthwise convolution: the paper's batch norm, or
#: layer norm (per frame: no statistics shared across the batch or across time).
ConvNormName = Literal["batch", "layer"]

#: Softmax attention's defaults; anything else needs a kernel with the "scores" capability.
DEFAULT_SCORING = {"score": "scaled_dot", "normalizer": "softmax", "include_self": True}


def scoring_clash(attention: str, options: object) -> str | None:
    """The first scoring field of ``options`` (``score``, ``normalizer``, ``include_self``)
    away from its default that kernel ``attention`` cannot honour, as it computes its own
    scaled dot-product softmax; ``None`` when there is none."""
    if KERNELS[attention].supports("scores"):
        return None
    changed = (
        name for name, default in DEFAULT_SCORING.items() if getattr(options, name) != default
    )
    return next(changed, None)


def kernel_takes_dropout(name: str) -> bool:
    """Whether the kernel called ``name`` drops attention weights (its own ``dropout``)."""
    return "dropout" in inspect.signature(KERNELS[name].__init__).parameters


def check_kernel_fits(
    attention: str, options: object, show: Callable[[str, object], str], kernel: str
) -> None:
    """Refuse, in one line, ``options`` that kernel ``attention`` cannot honour: a scoring
    field away from its default, or ``attention_dropout`` for a kernel that forms no
    weights. ``show(field, value)`` spells a setting as the caller's users write it;
    ``kernel`` names the kernel in the dropout refusal.

    Raises:
        ValueError: naming the field, its value and the kernel.
    """
    clash = scoring_clash(attention, options)
    if clash is not None:
        raise ValueError(
            f"{show(clash, getattr(options, clash))} needs {show('attention', 'dense')}: "
            f"kernel {attention!r} computes its own scaled dot-product softmax scores"
        )
    dropout = getattr(options, "attention_dropout", None)
    if dropout and not kernel_takes_dropout(attention):
        raise ValueError(
            f"{show('attention_dropout', dropout)}: {kernel} forms no attention weights to "
            "drop; leave it at its default"
        )


def check_convolution(kernel_size: int, norm: str) -> None:
    """One-line errors for a Conformer convolution's kernel size and normalisation (a
    config's ``conv_kernel_size`` and ``conv_norm``, or the module's own arguments)."""
    if kernel_size < 1:
        raise ValueError(f"conv_kernel_size must be >= 1, got {kernel_size}")
    if norm not in ("batch", "layer"):
        raise ValueError(f"conv_norm must be 'batch' or 'layer', got {norm!r}")


def _setting(name: str, value: object) -> str:
    """A keyword argument as Python spells it: ``score='dot'``."""
    return f"{name}={value!r}"


@dataclass(frozen=True)
class BlockConfig:
    """Every option of one block: :class:`~selfattn.blocks.EncoderBlock`,
    :class:`~selfattn.blocks.DecoderBlock` or :class:`~selfattn.blocks.ConformerBlock`.

    Attributes:
        embed_dim: E.
        num_heads: H (E must be divisible by H).
        ffn_dim: hidden size of the feed-forward network(s).
        dropout: on each sub-layer's output before the residual addition, inside the
            feed-forward network and on the attention weights unless ``ffn_dropout`` and
            ``attention_dropout`` say otherwise.
        attention_dropout: dropout on the attention weights alone (``None``: ``dropout``).
            On CPU, PyTorch has no fused attention dropout: any value > 0 leaves the fused
            kernel for a slower path, so ``0`` with ``dropout`` elsewhere is the fast choice.
        activation: feed-forward activation, see :data:`~selfattn.blocks.ACTIVATIONS`
            (transformer blocks; the Conformer's feed-forward modules are always Swish).
        norm_first: pre-LN instead of the paper's post-LN (transformer blocks; the
            Conformer's modules are always pre-normalised).
        layer_norm_eps: ε of every layer norm.
        bias: biases in every linear layer, convolution and layer norm.
        score: attention score, a key of :data:`selfattn.attention.scores.SCORES`
            (``"scaled_dot"``, ``"dot"``, ``"additive"``) or a callable.
        normalizer: attention normaliser, a key of
            :data:`selfattn.attention.normalizers.NORMALIZERS` (``"softmax"``, ``"relu"``,
            ``"sigmoid"``) or a callable.
        num_kv_heads: key/value heads (grouped-query attention; ``None``: H).
        include_self: False forbids each position attending to itself (self-attention).
        attention: the attention variant, a key of :data:`selfattn.kernels.KERNELS`
            (``"dense"``; ``"window"``, ``"linear"``, ``"performer"``, …). A stack builds
            one kernel per block from it; decoders need ``"dense"`` (KV cache).
        attention_options: the variant's options, e.g. ``{"window": 64}``.
        conv_kernel_size: K of the Conformer's depthwise convolution (Conformer only).
        conv_norm: ``"batch"`` or ``"layer"`` after that convolution (Conformer only).
        ffn_dropout: dropout on the feed-forward hidden layer alone (``None``: ``dropout``;
            ``0``: none there, BERT's placement).
    """

    embed_dim: int
    num_heads: int
    ffn_dim: int
    dropout: float = 0.0
    attention_dropout: float | None = None
    activation: ActivationName = "relu"
    norm_first: bool = False
    layer_norm_eps: float = 1e-5
    bias: bool = True
    score: str | ScoreFn = "scaled_dot"
    normalizer: str | NormalizerFn = "softmax"
    num_kv_heads: int | None = None
    include_self: bool = True
    attention: str = "dense"
    # A mapping is not hashable; the config stays hashable on its other fields.
    attention_options: Mapping[str, Any] = field(default_factory=dict, hash=False)
    conv_kernel_size: int = 31
    conv_norm: ConvNormName = "batch"
    ffn_dropout: float | None = None

    def __post_init__(self) -> None:
        # A private copy: the caller's dict may change later, a frozen config may not.
        object.__setattr__(self, "attention_options", dict(self.attention_options))
        self._check_sizes()
        self._check_rates()
        check_activation(self.activation)
        self._check_attention()
        check_convolution(self.conv_kernel_size, self.conv_norm)

    def _check_sizes(self) -> None:
        if self.embed_dim < 1 or self.num_heads < 1 or self.ffn_dim < 1:
            raise ValueError(
                f"embed_dim, num_heads and ffn_dim must be positive, "
                f"got {self.embed_dim}, {self.num_heads} and {self.ffn_dim}"
            )
        if self.embed_dim % self.num_heads:
            raise ValueError(
                f"embed_dim ({self.embed_dim}) must be divisible by num_heads ({self.num_heads})"
            )
        if self.num_kv_heads is not None and (
            self.num_kv_heads < 1 or self.num_heads % self.num_kv_heads
        ):
            raise ValueError(
                f"num_kv_heads ({self.num_kv_heads}) must divide num_heads ({self.num_heads})"
            )

    def _check_rates(self) -> None:
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {self.dropout}")
        if self.attention_dropout is not None and not 0.0 <= self.attention_dropout < 1.0:
            raise ValueError(
                f"attention_dropout must be in [0, 1) or None, got {self.attention_dropout}"
            )
        if self.ffn_dropout is not None and not 0.0 <= self.ffn_dropout < 1.0:
            raise ValueError(f"ffn_dropout must be in [0, 1) or None, got {self.ffn_dropout}")
        if self.layer_norm_eps <= 0:
            raise ValueError(f"layer_norm_eps must be > 0, got {self.layer_norm_eps}")

    def _check_attention(self) -> None:
        if isinstance(self.score, str) and self.score not in SCORES:
            raise ValueError(
                f"unknown score {self.score!r}; choose one of {sorted(SCORES)} or a callable"
            )
        if isinstance(self.normalizer, str) and self.normalizer not in NORMALIZERS:
            raise ValueError(
                f"unknown normalizer {self.normalizer!r}; choose one of {sorted(NORMALIZERS)} "
                "or a callable"
            )
        if self.attention not in KERNELS:
            raise ValueError(
                f"unknown attention kernel {self.attention!r}; choose one of {sorted(KERNELS)}"
            )
        check_kernel_fits(self.attention, self, _setting, f"kernel {self.attention!r}")
        kernel = KERNELS[self.attention]
        if self.num_kv_heads not in (None, self.num_heads) and not kernel.supports("gqa"):
            raise ValueError(
                f"num_kv_heads={self.num_kv_heads} needs attention='dense': kernel "
                f"{self.attention!r} needs as many key/value heads as query heads"
            )

    @property
    def head_dim(self) -> int:
        """D = E / H."""
        return self.embed_dim // self.num_heads

    @property
    def weight_dropout(self) -> float:
        """The dropout on attention weights: ``attention_dropout``, else ``dropout``."""
        return self.dropout if self.attention_dropout is None else self.attention_dropout

    @property
    def hidden_dropout(self) -> float:
        """The dropout on the feed-forward hidden layer: ``ffn_dropout``, else ``dropout``."""
        return self.dropout if self.ffn_dropout is None else self.ffn_dropout

    def kernel_options(self) -> dict[str, Any]:
        """The options a stack builds ``attention``'s kernel with: ``attention_options``,
        plus :attr:`weight_dropout` for a kernel that drops weights itself (a kernel
        brings its own dropout; the plain dense one is built by the attention module)."""
        options = dict(self.attention_options)
        if self.attention != "dense" and kernel_takes_dropout(self.attention):
            options.setdefault("dropout", self.weight_dropout)
        return options
