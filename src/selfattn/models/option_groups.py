"""The building blocks of every architecture's options: the base class, the groups of
fields that several architectures share (composed by inheritance, declared once), and the
check of each field's value, written once and run wherever the field exists.

An architecture's options class (one per file in :mod:`selfattn.models.architectures`)
holds exactly the fields it reads; each field carries a one-line description
(``selfattn config ARCHITECTURE`` prints them).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from selfattn.attention.dropout import DROPOUT_MASKS, DropoutMasks
from selfattn.attention.normalizers import NORMALIZERS
from selfattn.attention.scores import SCORES
from selfattn.blocks.config import check_kernel_fits
from selfattn.kernels import KERNELS
from selfattn.models.linear_layers import LINEAR_LAYERS, LinearLayers
from selfattn.positional import GRID_POSITIONAL, POSITIONAL

Pooling = Literal["mean", "first", "attention", "cls"]
Halting = Literal["none", "act"]
#: How the per-layer losses of ``model.exit_heads`` are weighted
#: (:mod:`selfattn.models.early_exit`).
ExitLossWeights = Literal["uniform", "linear"]


def doc(line: str) -> dict[str, str]:
    """A dataclass field's metadata: its one-line description."""
    return {"doc": line}


def describe(options: type[ModelOptions], name: str) -> str:
    """The one-line description of field ``name`` of ``options``."""
    return str({f.name: f for f in dataclasses.fields(options)}[name].metadata.get("doc", ""))


def toml_value(value: object) -> str:
    """``value`` as a TOML config spells it (``none``, ``true``, ``"text"``)."""
    if value is None:
        return '"none"'
    if isinstance(value, bool):
        return str(value).lower()
    return f'"{value}"' if isinstance(value, str) else str(value)


def toml_setting(name: str, value: object) -> str:
    """A model field set as a TOML config spells it: ``model.score = "dot"``."""
    return f"model.{name} = {toml_value(value)}"


# ----------------------------------------------------------------- one check per field


def _at_least(low: int) -> Callable[[str, Any], str | None]:
    def check(name: str, value: Any) -> str | None:
        return None if value >= low else f"model.{name} must be >= {low}, got {value}"

    return check


def _rate(name: str, value: Any) -> str | None:
    if value is None or 0.0 <= value < 1.0:
        return None
    return f"model.{name} must be in [0, 1){' or none' if name in _NONE_RATES else ''}, got {value}"


_NONE_RATES = ("attention_dropout", "ffn_dropout", "head_dropout")


def _one_of(choices: Any, what: str, *, none: bool = False) -> Callable[[str, Any], str | None]:
    def check(name: str, value: Any) -> str | None:
        if (none and value is None) or value in choices:
            return None
        listed = ", ".join(choices)
        return f"model.{name}: unknown {what} {value!r}; choose one of {listed}" + (
            " or none" if none else ""
        )

    return check


def _either(first: str, second: str, what: str) -> Callable[[str, Any], str | None]:
    def check(name: str, value: Any) -> str | None:
        if value in (first, second):
            return None
        return f"model.{name}: unknown {what} {value!r}; choose {first} or {second}"

    return check


def _known_kernel(name: str, value: Any) -> str | None:
    if value in KERNELS:
        return None
    return f"model.attention: unknown variant {value!r}; choose one of {', '.join(sorted(KERNELS))}"


def _named(name: str, value: Any) -> str | None:
    if value is not None and not str(value).strip():
        return "model.pretrained must name a checkpoint or a folder, or be none"
    return None


def _patch(name: str, value: Any) -> str | None:
    if value is None or value >= 1:
        return None
    return f"model.patch_size must be >= 1 or none, got {value}"


def _not_negative(name: str, value: Any) -> str | None:
    if 0 <= value < math.inf:
        return None
    qualifier = "" if math.isfinite(value) else "finite and "
    return f"model.{name} must be {qualifier}>= 0, got {value}"


def _masks(name: str, value: Any) -> str | None:
    if value in DROPOUT_MASKS:
        return None
    return f"model.dropout_masks: unknown kind {value!r}; choose {' or '.join(DROPOUT_MASKS)}"


def _linear(name: str, value: Any) -> str | None:
    if value in LINEAR_LAYERS:
        return None
    return f"model.linear_layers: unknown kind {value!r}; choose {' or '.join(LINEAR_LAYERS)}"


#: The check of each field's value on its own (``None``: fine, else the one-line refusal);
#: checks that relate two fields are the options classes' own.
FIELD_CHECKS: dict[str, Callable[[str, Any], str | None]] = {
    **dict.fromkeys(("embed_dim", "num_heads", "num_layers", "ffn_dim", "char_dim"), _at_least(1)),
    **dict.fromkeys(("memory_size", "memory_width"), _at_least(1)),
    "memory_tying": _either("adjacent", "layerwise", "tying"),
    "linear_start_steps": _not_negative,
    "memory_noise": _rate,
    "rnn_cell": _either("gru", "lstm", "cell"),
    "window_k": _not_negative,
    **dict.fromkeys(("dropout", "word_dropout", *_NONE_RATES), _rate),
    "dropout_masks": _masks,
    "linear_layers": _linear,
    "attention": _known_kernel,
    "positional": _one_of(POSITIONAL, "encoding", none=True),
    "grid_positional": _one_of(GRID_POSITIONAL, "encoding", none=True),
    "patch_size": _patch,
    "halting": _either("none", "act", "halting"),
    "ponder_weight": _not_negative,
    "normalizer": _one_of(NORMALIZERS, "normaliser"),
    "pretrained": _named,
    "exit_loss_weights": _either("uniform", "linear", "weighting"),
}


def check_values(options: Any) -> None:
    """Refuse the first field of the dataclass ``options`` whose value is bad on its own
    (:data:`FIELD_CHECKS`), in one line."""
    for item in dataclasses.fields(options):
        check = FIELD_CHECKS.get(item.name)
        problem = check(item.name, getattr(options, item.name)) if check else None
        if problem:
            raise ValueError(problem)


# ----------------------------------------------------------------------- the groups


@dataclass(frozen=True)
class ModelOptions:
    """What every architecture's options have: the ``model.architecture`` that names them.

    Subclasses are frozen dataclasses holding exactly the fields their architecture
    reads; constructing one checks every field (:data:`FIELD_CHECKS`) and the relations
    between them (:meth:`check`), raising one-line ``ValueError`` s that name the fields.
    """

    architecture: str = "transformer"

    def __post_init__(self) -> None:
        named = type(self).__dataclass_fields__["architecture"].default
        if self.architecture != named:
            # dataclasses.replace(options, architecture=...) keeps the other class's fields.
            raise ValueError(
                f"model.architecture = {self.architecture!r}: {type(self).__name__} holds the "
                f"options of {named!r}; build another architecture's with model_options"
            )
        check_values(self)
        self.check()

    def check(self) -> None:
        """Refuse fields that clash with each other (one line); each group adds its own."""

    @classmethod
    def field_names(cls) -> tuple[str, ...]:
        """The ``[model]`` keys this architecture reads, ``architecture`` first."""
        return tuple(f.name for f in dataclasses.fields(cls))


@dataclass(frozen=True)
class EncoderOptions(ModelOptions):
    """An input embedding → a sequence encoder → a task head: the fields every such
    architecture reads (the embedding's, the head's and the layers' choices)."""

    embed_dim: int = field(
        default=128, metadata=doc("E: size of the input vectors the encoder receives")
    )
    num_layers: int = field(
        default=2, metadata=doc("blocks / MLP layers / GRU layers / convolutions")
    )
    ffn_dim: int = field(
        default=256,
        metadata=doc("the feed-forward width of attention blocks; a baseline's hidden width"),
    )
    dropout: float = field(
        default=0.1,
        metadata=doc("dropout wherever a layer has some, unless a field says otherwise"),
    )
    pooling: Pooling = field(
        default="mean",
        metadata=doc("a sequence task's L vectors → one: mean, first, attention or cls"),
    )
    char_features: bool = field(
        default=False, metadata=doc("text: a character-level encoder per token as well")
    )
    char_dim: int = field(default=48, metadata=doc("size of each token's character-level vector"))
    word_dropout: float = field(
        default=0.0,
        metadata=doc("text, training: replace a word by the unknown word with this probability"),
    )
    patch_size: int | None = field(
        default=None, metadata=doc("image data: P × P patches, one vector each (ViT)")
    )
    grid_positional: str | None = field(
        default=None,
        metadata=doc("image data: a 2-D positional encoding (sinusoidal2d, learned2d) or none"),
    )
    head_dropout: float | None = field(
        default=0.0, metadata=doc("dropout before the task head; none: model.dropout")
    )
    dropout_masks: DropoutMasks = field(
        default="auto",
        metadata=doc("how dropout draws masks: bernoulli, uniform, auto (uniform on the CPU)"),
    )
    linear_layers: LinearLayers = field(
        default="auto",
        metadata=doc("the matrix product of linear layers in training: torch, onednn, auto"),
    )

    @property
    def head_rate(self) -> float:
        """The dropout before the task head: ``head_dropout``, else ``dropout``."""
        return self.dropout if self.head_dropout is None else self.head_dropout

    def check(self) -> None:
        super().check()
        if not self.char_features and self.char_dim != 48:
            raise ValueError(f"model.char_dim = {self.char_dim} needs model.char_features = true")
        positional = getattr(self, "positional", None)
        if self.grid_positional is not None and positional is not None:
            raise ValueError(
                f"model.grid_positional ({self.grid_positional!r}) replaces the 1-D "
                f'model.positional ({positional!r}): set model.positional = "none"'
            )


@dataclass(frozen=True)
class HeadsOptions(EncoderOptions):
    """An encoder of multi-head attention blocks (self-attention over a sequence or along a
    graph's edges): the number of heads."""

    num_heads: int = field(
        default=4, metadata=doc("H: attention heads (embed_dim must be divisible by it)")
    )

    def check(self) -> None:
        super().check()
        check_heads(self.embed_dim, self.num_heads)


@dataclass(frozen=True)
class AttentionOptions(HeadsOptions):
    """An encoder of self-attention blocks: the attention's fields."""

    attention: str = field(
        default="dense",
        metadata=doc(
            "the attention kernel: dense, window, linear, performer, linformer, lsh, nystrom"
        ),
    )
    attention_size: int | None = field(
        default=None,
        metadata=doc("the kernel's size (window half-width, features, length, buckets, landmarks)"),
    )
    attention_dropout: float | None = field(
        default=None, metadata=doc("dropout on the attention weights; none: model.dropout")
    )
    score: str = field(
        default="scaled_dot", metadata=doc("the attention score: scaled_dot, dot or additive")
    )
    normalizer: str = field(
        default="softmax", metadata=doc("scores → weights: softmax, relu or sigmoid")
    )
    include_self: bool = field(default=True, metadata=doc("false: no position attends to itself"))
    share_weights: bool = field(
        default=False, metadata=doc("Universal Transformer: one block num_layers times")
    )
    halting: Halting = field(
        default="none",
        metadata=doc("act: adaptive depth (needs share_weights); none: a fixed depth"),
    )
    ponder_weight: float = field(
        default=0.01, metadata=doc('with halting = "act": τ, the ponder cost\'s weight')
    )

    def check(self) -> None:
        super().check()
        if self.attention_size is not None:
            if KERNELS[self.attention].size_option is None:
                raise ValueError(
                    f"model.attention_size: attention {self.attention!r} has no size; leave it out"
                )
            if self.attention_size < (0 if self.attention == "window" else 1):
                raise ValueError(
                    f"model.attention_size must be positive, got {self.attention_size}"
                )
        if self.halting == "act" and not self.share_weights:
            raise ValueError(
                'model.halting = "act" needs model.share_weights = true: adaptive depth runs '
                "one shared block up to num_layers times"
            )
        if self.halting == "none" and self.ponder_weight != 0.01:
            raise ValueError(
                f"model.ponder_weight = {self.ponder_weight} weighs the ponder cost of "
                'model.halting = "act"; without it leave it at its default'
            )
        check_score(self.score, rnn=False)
        check_kernel_fits(self.attention, self, toml_setting, f"model.attention {self.attention!r}")

    def attention_options(self) -> dict[str, int]:
        """The keyword options of the attention kernel this config names."""
        option_name = KERNELS[self.attention].size_option
        if option_name is None or self.attention_size is None:
            return {}
        return {option_name: self.attention_size}


@dataclass(frozen=True)
class ExitOptions(ModelOptions):
    """Early exit (lecture 003, dynamic computation; :mod:`selfattn.models.early_exit`)."""

    exit_heads: bool = field(
        default=False,
        metadata=doc("a classifier after every block, trained jointly (eval --exit-threshold)"),
    )
    exit_loss_weights: ExitLossWeights = field(
        default="uniform",
        metadata=doc("with exit_heads: the per-block losses' weights, uniform or linear"),
    )

    def check(self) -> None:
        super().check()
        if not self.exit_heads and self.exit_loss_weights != "uniform":
            raise ValueError(
                f'model.exit_loss_weights = "{self.exit_loss_weights}" needs '
                "model.exit_heads = true"
            )


@dataclass(frozen=True)
class AttentionStackOptions(ExitOptions, AttentionOptions):
    """A stack of self-attention blocks over a sequence (a transformer's or a Conformer's):
    the attention's fields, early exits and the positional encoding."""

    positional: str | None = field(
        default="sinusoidal",
        metadata=doc("the positional encoding (sinusoidal, learned, relative, rope, …) or none"),
    )


@dataclass(frozen=True)
class ConvolutionOptions(EncoderOptions):
    """An encoder of stacked convolutions (``ffn_dim``: their channels): the kernel's size."""

    window_k: int = field(default=5, metadata=doc("kernel half-width k (kernel size 2k + 1)"))


#: ``model.score`` values of the ``rnn`` architecture only (Luong's "general": zᵀ W_a h).
RNN_ONLY_SCORES = ("general",)


def check_heads(embed_dim: int, num_heads: int) -> None:
    """Refuse, in one line, heads that do not split ``embed_dim`` evenly."""
    if embed_dim % num_heads:
        raise ValueError(
            f"model.embed_dim ({embed_dim}) must be divisible by model.num_heads ({num_heads})"
        )


def check_score(score: str, *, rnn: bool) -> None:
    """Refuse an unknown ``model.score`` in one line (``general``: the ``rnn`` only)."""
    choices = [*SCORES, *(RNN_ONLY_SCORES if rnn else ())]
    if score not in choices:
        hint = "" if rnn else ' (general: model.architecture = "rnn" only)'
        raise ValueError(
            f"model.score: unknown score {score!r}; choose one of {', '.join(choices)}{hint}"
        )
