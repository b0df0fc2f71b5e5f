"""The flat view of the ``[model]`` section that today's builders read.

Each architecture owns its options: a frozen dataclass of exactly the fields it reads, one
file each in :mod:`selfattn.models.architectures`, registered in
:data:`~selfattn.models.registry.ARCHITECTURES`. The loader reads a ``[model]`` table
through them (:func:`~selfattn.models.registry.model_options`), so a key the architecture
does not read is refused as unknown. :class:`ModelConfig` is the union of all of them with
every unread field at its default: the one object the builders and task types still take,
checked on construction by the architecture's own options class.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Any

from selfattn.attention.dropout import DropoutMasks
from selfattn.models.architectures import ARCHITECTURES
from selfattn.models.architectures.memn2n import MemoryTying
from selfattn.models.architectures.rnn import RNNCellName
from selfattn.models.linear_layers import LinearLayers
from selfattn.models.option_groups import (
    RNN_ONLY_SCORES,
    AttentionOptions,
    ExitLossWeights,
    Halting,
    ModelOptions,
    Pooling,
    check_values,
    toml_value,
)
from selfattn.models.registry import architecture_named


def fields_read(architecture: str) -> frozenset[str]:
    """The ``[model]`` fields ``architecture`` reads (its options class's)."""
    return frozenset(architecture_named(architecture).options.field_names())


#: The architectures of the ``bits`` task, and only of it.
BITS_ARCHITECTURES = tuple(
    name for name, entry in ARCHITECTURES.items() if "bit_steps" in entry.produces
)

#: Architectures whose encoder can read a prepended [CLS] vector (``pooling = "cls"``).
CLS_ARCHITECTURES = ("transformer", "conformer")

__all__ = ["RNN_ONLY_SCORES", "toml_value"]


@dataclass(frozen=True)
class ModelConfig:
    """What model to build: input embedding → sequence encoder → task head.

    Attributes:
        architecture: a key of :data:`selfattn.models.architectures.ARCHITECTURES`:
            ``transformer`` (self-attention), or one of the lecture's baselines: ``fc``
            (an MLP on each vector alone), ``fc_window`` (an MLP on the ±``window_k``
            neighbourhood), ``bigru`` (bidirectional GRU), ``cnn`` (1-D convolutions),
            ``conformer`` (self-attention + convolution blocks, Gulati et al. 2020),
            ``graph`` (self-attention along a graph's edges, :mod:`selfattn.models.graph`),
            ``cnn2d`` (a 2-D CNN over an image's pixel grid, :mod:`selfattn.models.vision`),
            or ``memn2n``, not an encoder but an end-to-end memory network
            (:mod:`selfattn.models.memory`, lecture 003): a story's facts are its memories,
            its question reads them over ``num_layers`` hops (sequence tasks on text);
            for the ``bits`` task (the copy recipes), ``ntm``, a neural Turing machine,
            or ``lstm``, its baseline (:mod:`selfattn.models.bits`); for the ``seq2seq``
            task, ``rnn``: the RNN encoder–decoder with attention
            (:mod:`selfattn.models.rnn_seq2seq`, lecture 003).
        embed_dim: E, size of the input vectors the encoder receives.
        num_heads: H, attention heads (``transformer``, ``conformer``, ``graph``).
        num_layers: blocks / MLP layers / GRU or LSTM layers / convolutions / memory hops.
        ffn_dim: the transformer's feed-forward width; the baselines' hidden width (and
            output size); the LSTM's and the neural Turing machine's controller's size;
            the ``rnn`` decoder's state size (each encoder direction has half; even).
        dropout: dropout everywhere a layer has some (unless ``attention_dropout``,
            ``ffn_dropout`` or ``head_dropout`` says otherwise there).
        positional: positional encoding of the transformer and the Conformer, a key of
            :data:`selfattn.positional.POSITIONAL`, or ``None`` (``"none"`` in TOML; what
            every other architecture has).
        pooling: how a sequence task turns L vectors into one: ``mean`` over real
            positions, the ``first`` position, learned-query ``attention``, or ``cls``: a
            learned [CLS] vector is put before the sequence and the head reads the
            encoder's output there (ViT, Devlin et al.'s BERT; ``transformer`` and
            ``conformer``). Token and seq2seq tasks do not pool: leave it at ``mean``.
        window_k: half-width k of the ``fc_window`` window (2k + 1 vectors) and of the
            ``cnn`` and ``conformer`` convolution kernels (size 2k + 1).
        char_features: text input also gets a character-level encoder per token, so
            words unseen in training still get informative vectors.
        char_dim: size of the character-level vector of a token.
        word_dropout: text input only: in training, each real word is replaced by the
            unknown word with this probability (its characters are kept), so the model
            learns to tag words it has never seen from their spelling and context.
            In [0, 1); ``0`` turns it off.
        norm_first: pre-LN transformer and graph blocks (they train stably with little
            warm-up); a Conformer is always pre-normalised.
        attention: the attention variant of ``transformer`` and ``conformer`` (and a
            seq2seq encoder's), a key of
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
        patch_size: image data only (:mod:`selfattn.models.vision`): P to cut each image
            into P × P patches, one vector each (ViT); ``None``: one vector per pixel.
        grid_positional: image data only: a 2-D positional encoding of each pixel's or
            patch's (row, column), a key of :data:`selfattn.positional.GRID_POSITIONAL`
            (``sinusoidal2d``, ``learned2d``), or ``None``. With it, ``positional`` must be
            ``none`` (one position per vector is enough).
        score: the attention score (lecture 000): ``scaled_dot`` (Vaswani et al.),
            ``dot`` or ``additive`` (Bahdanau et al.), see
            :data:`selfattn.attention.scores.SCORES`; with ``attention = "dense"``. The
            ``rnn`` architecture's match function takes these and ``general`` (Luong et
            al.'s zᵀ W_a h).
        normalizer: what turns scores into weights: ``softmax``, ``relu`` or ``sigmoid``
            (the lecture's "ReLU instead of softmax"), see
            :data:`selfattn.attention.normalizers.NORMALIZERS`; with dense attention.
        include_self: false forbids each position (each graph node) attending to itself.
        share_weights: Universal Transformer (Dehghani et al. 2019): one block applied
            ``num_layers`` times (``transformer``, ``conformer``, ``graph``, and seq2seq's
            encoder and decoder).
        rnn_cell: ``rnn``: the encoder's and the decoder's cell, ``gru`` or ``lstm``.
        input_feeding: ``rnn``: feed each step's attentional vector to the decoder with
            the next input word (Luong et al. 2015); false: the RNN runs without it.
        pretrained: start from a pretrained BERT checkpoint: a registered name
            (``"minilm-l6"``, :data:`selfattn.pretrained.PRETRAINED`) or a local Hugging
            Face folder; text token, sequence and regression tasks
            (:mod:`selfattn.models.pretrained`). The checkpoint's shape replaces
            ``embed_dim``, ``num_heads``, ``num_layers``, ``ffn_dim`` and the block design;
            setting one of them to another value is refused.
        exit_heads: early exit (lecture 003, dynamic computation;
            :mod:`selfattn.models.early_exit`): a classifier after every block of a
            ``transformer`` or ``conformer`` encoder on a token or sequence task, trained
            jointly; ``selfattn eval RUN --exit-threshold T`` then stops each example at
            the first block whose classifier is confident enough.
        exit_loss_weights: with ``exit_heads``, the weights of the per-block losses, which
            sum to 1: ``"uniform"`` (1/N each) or ``"linear"`` (block i of N: i / (1 + … +
            N), deeper blocks count more, as Zhou et al. 2020's PABEE).
        memory_size: ``memn2n``: the most recent facts a story keeps as memories (50, as
            Sukhbaatar et al.); older ones are not read. ``ntm``: the memory's slots N.
        memory_width: ``ntm``: the size M of each memory slot.
        memory_tying: ``memn2n``: ``"adjacent"`` (each hop's output embedding is the next
            hop's input embedding; the answer matrix is the last one) or ``"layerwise"``
            (all hops share them, with a linear map between hops).
        linear_start_steps: ``memn2n``: train the first this many optimizer steps without
            the hops' softmax (linear start, §4.2), then with it; 0: never linear.
        memory_noise: ``memn2n``: in training, put an empty memory before each fact with
            this probability (random noise, §4.2: 0.1 in the paper), so the learned
            per-age vectors do not overfit; 0: none.
        halting: ``"act"``: adaptive depth, the Universal Transformer with Adaptive
            Computation Time (Graves 2016; Dehghani et al. 2019 §2.2;
            :mod:`selfattn.models.act`): with ``share_weights``, each position runs the
            shared block until its sigmoid halting probabilities sum to 0.99, at most
            ``num_layers`` steps, and its output is the halting-weighted mean of its states;
            a sinusoidal step signal is added with the positions at every step.
            ``transformer`` and ``conformer`` sequence, token and regression tasks.
            ``"none"``: a fixed depth.
        ponder_weight: with ``halting = "act"``, τ: the loss adds τ times the mean ponder
            cost N + R over real positions (N steps used, R the remainder); larger values
            halt sooner.
        ffn_dropout: dropout on the feed-forward hidden layer of ``transformer``,
            ``conformer``, ``graph`` and seq2seq blocks; ``None`` (``"none"`` in TOML):
            ``dropout``. The default ``0`` with ``head_dropout = 0`` is BERT's placement
            (Devlin et al. 2019: dropout on embeddings, attention weights and sub-layer
            outputs only), which trains faster (fewer random masks per step); the shipped
            configs measured before it became the default pin ``"none"``.
        head_dropout: dropout on the encoder's output before the task head (after pooling,
            for a sequence task); ``None`` (``"none"`` in TOML): ``dropout``; default 0.
        dropout_masks: how every dropout layer and dense attention's weight dropout draw
            their masks (:mod:`selfattn.attention.dropout`): ``"bernoulli"``, PyTorch's
            ``F.dropout``, or ``"uniform"``, a threshold on ``torch.rand`` noise: the same
            distribution, about half the masks' CPU time, another random stream (a run
            does not repeat one trained with the other). The default ``"auto"`` is
            ``"uniform"`` on the CPU and ``"bernoulli"`` elsewhere (fused kernels, such as
            a GPU's flash attention, draw PyTorch's masks themselves).
        linear_layers: the matrix product every linear layer trains with:
            ``"torch"`` (``F.linear``) or ``"onednn"`` (oneDNN's linear for the forward
            and input gradient of training steps on the CPU in float32,
            :class:`~selfattn.attention.packed_linear.OneDNNLinear`: faster than MKL's
            on some CPUs (benchmarks/README.md), rounded differently, so a run does not
            repeat one trained with the other; evaluation and other devices run
            ``F.linear``). The default
            ``"auto"`` is ``"onednn"`` without its warning on other devices or under amp.

    Each architecture reads the fields of its options class
    (:data:`~selfattn.models.registry.ARCHITECTURES`); constructing a ModelConfig checks
    them there and refuses another field set to anything but its default, in one line
    (:meth:`check_architecture`).
    """

    architecture: str = "transformer"
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
    score: str = "scaled_dot"
    normalizer: str = "softmax"
    include_self: bool = True
    share_weights: bool = False
    rnn_cell: RNNCellName = "gru"
    input_feeding: bool = True
    pretrained: str | None = None
    exit_heads: bool = False
    exit_loss_weights: ExitLossWeights = "uniform"
    memory_size: int = 50
    memory_width: int = 20
    memory_tying: MemoryTying = "adjacent"
    linear_start_steps: int = 0
    memory_noise: float = 0.0
    halting: Halting = "none"
    ponder_weight: float = 0.01
    ffn_dropout: float | None = 0.0
    head_dropout: float | None = 0.0
    dropout_masks: DropoutMasks = "auto"
    linear_layers: LinearLayers = "auto"

    def __post_init__(self) -> None:
        check_values(self)  # every value, read or not, is a value its field can take
        self.options()  # what the architecture reads; the rest is checked with the task

    def options(self) -> ModelOptions:
        """This config as its architecture's own options (which check every field read).

        Raises:
            ValueError: an unknown architecture or a bad value (one line).
        """
        options = architecture_named(self.architecture).options
        return options(**{name: getattr(self, name) for name in options.field_names()})

    def check_architecture(self) -> None:
        """Refuse, in one line, every field the architecture would ignore, unless it is left
        at its default (``positional = "none"`` is what an architecture without positions
        has). The task's check before any data is read calls it, and every builder.

        Raises:
            ValueError: naming the field, its value and the architecture.
        """
        reads = fields_read(self.architecture)
        for name in DEFAULTS:
            if name not in reads:
                refuse_unread(self.architecture, name, getattr(self, name))
        if self.pooling == "cls" and self.architecture not in CLS_ARCHITECTURES:
            raise ValueError(
                f'model.pooling = "cls" needs an attention encoder '
                f"({' or '.join(CLS_ARCHITECTURES)}), not architecture {self.architecture!r}; "
                'use pooling = "attention"'
            )

    def for_architecture(self, architecture: str) -> ModelConfig:
        """This config with another architecture, and the fields that one does not read
        back at their defaults (positions: none), so the same section can train every
        architecture (``selfattn demo`` compares the baselines this way)."""
        reads = fields_read(architecture)
        unread = {name: default for name, default in DEFAULTS.items() if name not in reads}
        if "positional" in unread:
            unread["positional"] = None
        return replace(self, **{**unread, "architecture": architecture})

    @property
    def head_rate(self) -> float:
        """The dropout before the task head: ``head_dropout``, else ``dropout``."""
        return self.dropout if self.head_dropout is None else self.head_dropout

    def attention_options(self) -> dict[str, int]:
        """The keyword options of the attention kernel this config names."""
        options = self.options()
        return options.attention_options() if isinstance(options, AttentionOptions) else {}


#: Every field's default, for the "left at its default" checks.
DEFAULTS: dict[str, Any] = {field.name: field.default for field in fields(ModelConfig)}
#: The defaults these fields had before their BERT-style and CPU-faster ones. Every run
#: folder stores every field, so an older run holds these; where a model does not read
#: the field they mean "unset" as the current default does, and the run stays loadable.
FORMER_DEFAULTS: dict[str, Any] = {
    "ffn_dropout": None,
    "head_dropout": None,
    "dropout_masks": "bernoulli",
    "linear_layers": "torch",
}


def refuse_unread(architecture: str, name: str, value: Any) -> None:
    """Refuse, in one line naming the fields ``architecture`` reads, field ``name`` at
    ``value`` when the architecture does not read it and the value is not its default
    (nor ``positional = "none"``, what an architecture without positions has)."""
    if unset(name, value) or (name == "positional" and value is None):
        return
    reads = ", ".join(architecture_named(architecture).options.field_names())
    raise ValueError(
        f"model.{name} = {toml_value(value)}: architecture {architecture!r} does not use it; "
        f"leave it at its default ({toml_value(DEFAULTS[name])}) or out ({architecture} "
        f"reads: {reads})"
    )


def unset(name: str, value: Any) -> bool:
    """Whether ``value`` of field ``name`` is its default, or its former one
    (:data:`FORMER_DEFAULTS`): what a model that does not read it accepts."""
    return value == DEFAULTS[name] or (name in FORMER_DEFAULTS and value == FORMER_DEFAULTS[name])
