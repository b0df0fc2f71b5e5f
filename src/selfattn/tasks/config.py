"""The model section of a run's configuration.

It lives here, beside the code that reads it (:func:`selfattn.tasks.build_model`), so that
imports point downward; :mod:`selfattn.train.config` re-exports it with the other sections.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from selfattn.kernels import KERNELS
from selfattn.positional import GRID_POSITIONAL, POSITIONAL

Architecture = Literal[
    "transformer", "fc", "fc_window", "bigru", "cnn", "conformer", "graph", "cnn2d"
]
Pooling = Literal["mean", "first", "attention"]


@dataclass(frozen=True)
class ModelConfig:
    """What model to build: input embedding → sequence encoder → task head.

    Attributes:
        architecture: the sequence encoder, a key of :data:`selfattn.tasks.ENCODERS`:
            ``transformer`` (self-attention), or one of the lecture's baselines: ``fc``
            (an MLP on each vector alone), ``fc_window`` (an MLP on the ±``window_k``
            neighbourhood), ``bigru`` (bidirectional GRU), ``cnn`` (1-D convolutions),
            ``conformer`` (self-attention + convolution blocks, Gulati et al. 2020),
            ``graph`` (self-attention along a graph's edges, :mod:`selfattn.tasks.graph`),
            ``cnn2d`` (a 2-D CNN over an image's pixel grid, :mod:`selfattn.tasks.vision`).
        embed_dim: E, size of the input vectors the encoder receives.
        num_heads: H, attention heads (``transformer`` only).
        num_layers: blocks / MLP layers / GRU layers / convolutions.
        ffn_dim: the transformer's feed-forward width; the baselines' hidden width (and
            output size).
        dropout: dropout everywhere a layer has some.
        positional: positional encoding of the transformer, a key of
            :data:`selfattn.positional.POSITIONAL`, or ``None`` (``"none"`` in TOML).
        pooling: how a sequence task turns L vectors into one: ``mean`` over real
            positions, ``first`` position (CLS-style), or learned-query ``attention``.
        window_k: half-width k of the ``fc_window`` window (2k + 1 vectors) and of the
            ``cnn`` and ``conformer`` convolution kernels (size 2k + 1).
        char_features: text input also gets a character-level encoder per token, so
            words unseen in training still get informative vectors.
        char_dim: size of the character-level vector of a token.
        word_dropout: text input only: in training, each real word is replaced by the
            unknown word with this probability (its characters are kept), so the model
            learns to tag words it has never seen from their spelling and context.
            In [0, 1); ``0`` turns it off.
        norm_first: pre-LN transformer blocks (they train stably with little warm-up).
        attention: the transformer's attention variant, a key of
            :data:`selfattn.kernels.KERNELS`: ``dense`` (fused softmax attention, the
            default), ``window`` (truncated), ``linear``, ``performer``, ``linformer``,
            ``lsh``, ``nystrom`` (lecture 000 §More; Tay et al., "Efficient Transformers").
        attention_size: the variant's size, if it has one: the window half-width w
            (``window``), random features (``performer``), projected length
            (``linformer``), buckets (``lsh``), landmarks (``nystrom``); ``None`` (``"none"``
            in TOML) keeps the variant's default.
        attention_dropout: dropout on the attention weights of ``transformer``,
            ``conformer`` and seq2seq models; ``None`` (``"none"`` in TOML): ``dropout``.
            On CPU any value > 0 leaves PyTorch's fused attention kernel (it has no fused
            dropout) for a path several times slower at long inputs; ``0`` keeps it.
        patch_size: image data only (:mod:`selfattn.tasks.vision`): P to cut each image
            into P × P patches, one vector each (ViT); ``None``: one vector per pixel.
        grid_positional: image data only: a 2-D positional encoding of each pixel's or
            patch's (row, column), a key of :data:`selfattn.positional.GRID_POSITIONAL`
            (``sinusoidal2d``, ``learned2d``), or ``None``. With it, ``positional`` must be
            ``none`` (one position per vector is enough).
    """

    architecture: Architecture = "transformer"
    embed_dim: int = 128
    num_heads: int = 4
    num_layers: int = 2
    ffn_dim: int = 256
    dropout: float = 0.1
    positional: str | None = "sinusoidal"
    pooling: Pooling = "mean"
    window_k: int = 5
    char_features: bool = False
    char_dim: int = 48
    word_dropout: float = 0.0
    norm_first: bool = True
    attention: str = "dense"
    attention_size: int | None = None
    attention_dropout: float | None = None
    patch_size: int | None = None
    grid_positional: str | None = None

    def __post_init__(self) -> None:
        for name in ("embed_dim", "num_heads", "num_layers", "ffn_dim", "char_dim"):
            if getattr(self, name) < 1:
                raise ValueError(f"model.{name} must be >= 1, got {getattr(self, name)}")
        if self.window_k < 0:
            raise ValueError(f"model.window_k must be >= 0, got {self.window_k}")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"model.dropout must be in [0, 1), got {self.dropout}")
        if self.attention_dropout is not None and not 0.0 <= self.attention_dropout < 1.0:
            raise ValueError(
                f"model.attention_dropout must be in [0, 1) or none, got {self.attention_dropout}"
            )
        if not 0.0 <= self.word_dropout < 1.0:
            raise ValueError(f"model.word_dropout must be in [0, 1), got {self.word_dropout}")
        if self.attention not in KERNELS:
            raise ValueError(
                f"model.attention: unknown variant {self.attention!r}; choose one of "
                f"{', '.join(sorted(KERNELS))}"
            )
        if self.attention_size is not None:
            if KERNELS[self.attention].size_option is None:
                raise ValueError(
                    f"model.attention_size: attention {self.attention!r} has no size; leave it out"
                )
            if self.attention_size < (0 if self.attention == "window" else 1):
                raise ValueError(
                    f"model.attention_size must be positive, got {self.attention_size}"
                )
        if self.positional is not None and self.positional not in POSITIONAL:
            raise ValueError(
                f"model.positional: unknown encoding {self.positional!r}; choose one of "
                f"{', '.join(POSITIONAL)} or none"
            )
        if (
            self.architecture in ("transformer", "conformer", "graph")
            and self.embed_dim % self.num_heads
        ):
            raise ValueError(
                f"model.embed_dim ({self.embed_dim}) must be divisible by "
                f"model.num_heads ({self.num_heads})"
            )
        self._check_image_options()

    def _check_image_options(self) -> None:
        if self.patch_size is not None and self.patch_size < 1:
            raise ValueError(f"model.patch_size must be >= 1 or none, got {self.patch_size}")
        if self.grid_positional is None:
            return
        if self.grid_positional not in GRID_POSITIONAL:
            raise ValueError(
                f"model.grid_positional: unknown encoding {self.grid_positional!r}; choose "
                f"one of {', '.join(GRID_POSITIONAL)} or none"
            )
        if self.positional is not None:
            raise ValueError(
                f"model.grid_positional ({self.grid_positional!r}) replaces the 1-D "
                f'model.positional ({self.positional!r}): set model.positional = "none"'
            )

    def attention_options(self) -> dict[str, int]:
        """The keyword options of the attention kernel this config names."""
        option = KERNELS[self.attention].size_option
        if option is None or self.attention_size is None:
            return {}
        return {option: self.attention_size}
