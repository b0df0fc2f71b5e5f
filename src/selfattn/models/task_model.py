"""The builder of a whole task model (:class:`~selfattn.models.composed.TaskModel`: input
embedding → sequence encoder → head, or the early-exit, memory or pretrained model).

The model config is the architecture's own options (its class in
:data:`~selfattn.models.registry.ARCHITECTURES`, holding exactly the fields it reads). Every
field is honoured by the model it builds or refused in one line by :func:`check_fields`:
what the task or the input kind cannot use.
"""

from __future__ import annotations

from typing import Any

from torch import nn

from selfattn.datatypes import TaskType
from selfattn.kernels.linformer import LinformerKernel
from selfattn.models.architectures import ARCHITECTURES, build_encoder
from selfattn.models.architectures.memn2n import MemN2NOptions
from selfattn.models.architectures.transformer import TransformerOptions
from selfattn.models.composed import TaskModel
from selfattn.models.early_exit import build_exit_model
from selfattn.models.embedding import InputEmbedding
from selfattn.models.encoders import AttentionSequenceEncoder, SequenceEncoder
from selfattn.models.heads import (
    ClsToken,
    SequenceClassifier,
    SequenceRegressor,
    TokenClassifier,
)
from selfattn.models.layer_choices import use_layer_choices
from selfattn.models.memory import MemoryTaskModel
from selfattn.models.option_groups import EncoderOptions, ExitOptions, ModelOptions, toml_value
from selfattn.models.pretrained import PretrainedTaskModel, build_pretrained_model
from selfattn.models.pretrained_exit import build_pretrained_exit_model
from selfattn.models.registry import cls_architectures, field_default, unset
from selfattn.models.spec import TaskSpec
from selfattn.models.vision import ImageEmbedding, build_image_parts, uses_image
from selfattn.positional.learned import LearnedPositional

#: The architectures of the ``bits`` task, and only of it.
BITS_ARCHITECTURES = tuple(
    name for name, entry in ARCHITECTURES.items() if "bit_steps" in entry.produces
)

#: The shipped architectures whose encoder can read a prepended [CLS] vector
#: (``pooling = "cls"``): those registered with ``cls_token=True``.
CLS_ARCHITECTURES = cls_architectures()


def check_fields(config: ModelOptions, *, task: TaskType, text: bool | None) -> None:
    """Refuse, in one line, a field of the architecture's options that the task or the input
    kind would ignore (image-only fields without an image grid:
    :func:`~selfattn.models.vision.build_image_parts`); a field the architecture does not
    read is not in its options at all.

    Args:
        config: the model section, the architecture's options.
        task: ``"token"``, ``"sequence"``, ``"regression"`` or ``"seq2seq"``.
        text: the input is words (token ids), so character features and word dropout
            apply; ``None``: not known yet (those two are not checked).
    """
    cls_ok = cls_architectures()  # read now: an architecture may be registered later
    if getattr(config, "pooling", "mean") == "cls" and config.architecture not in cls_ok:
        raise ValueError(
            f'model.pooling = "cls" needs an attention encoder '
            f"({' or '.join(cls_ok)}), not architecture {config.architecture!r}; "
            'use pooling = "attention"'
        )
    unused: dict[str, str] = {}
    if task in ("token", "seq2seq"):
        unused["pooling"] = f"a {task} task pools nothing"
    if text is False:
        unused |= dict.fromkeys(("char_features", "word_dropout"), "this data is not words")
    if task not in ("token", "sequence"):
        unused["exit_heads"] = f"early exit is for token and sequence tasks, not a {task} task"
    elif getattr(config, "halting", "none") == "act":
        unused["exit_heads"] = (
            'model.halting = "act" chooses each position\'s depth itself; early exit needs '
            "the fixed stack's every block"
        )
    if task == "seq2seq":
        unused["pretrained"] = "a seq2seq model is trained from scratch here"
        unused["head_dropout"] = "a seq2seq model has no dropout before its output layer"
        unused |= dict.fromkeys(
            ("char_features", "word_dropout", "patch_size", "grid_positional"),
            "a seq2seq model reads its source through one embedding",
        )
        unused |= dict.fromkeys(
            ("halting", "ponder_weight"), "a seq2seq model's stacks run a fixed depth"
        )
    reads = config.field_names()
    for name, reason in unused.items():
        value = getattr(config, name, None)
        if name in reads and not unset(name, value):
            raise ValueError(
                f"model.{name} = {toml_value(value)}: {reason}; leave it at its default "
                f"({toml_value(field_default(name))})"
            )


def check_label_model(config: ModelOptions, *, task: TaskType, text: bool | None) -> None:
    """Refuse, in one line, a ``[model]`` section that cannot serve a label task: an
    architecture of another task type, or a field the task or the input kind would ignore
    (:func:`check_fields`). It needs no data, so a run refuses before reading any.

    Args:
        config: the model section.
        task: ``"token"``, ``"sequence"``, ``"regression"`` or ``"multilabel"``.
        text: the input is words; ``None`` when the data are not read yet and the recipe
            does not say (the input-kind checks wait for the build).
    """
    if config.architecture in BITS_ARCHITECTURES:
        raise ValueError(
            f"model.architecture = {config.architecture!r} is for the bits task (the copy "
            f"and repeat-copy recipes), not a {task} task"
        )
    if config.architecture == "rnn":
        raise ValueError(
            'model.architecture = "rnn" is the seq2seq RNN encoder–decoder with attention, '
            f'not a {task} task\'s encoder; use "bigru" for a recurrent one'
        )
    if config.architecture == "memn2n" and task != "sequence":
        raise ValueError(
            f'model.architecture = "memn2n" answers one label per story (a sequence task), '
            f"not a {task} task"
        )
    check_fields(config, task=task, text=text)


def build_model(
    config: ModelOptions,
    *,
    task: TaskType,
    vocab_size: int | None,
    char_vocab_size: int | None,
    feature_dim: int | None,
    num_labels: int,
    max_len: int = 512,
    edge_dim: int | None = None,
    image_shape: tuple[int, int, int] | None = None,
    target_mean: float = 0.0,
    target_std: float = 1.0,
    pretrained: dict[str, Any] | None = None,
) -> TaskModel | PretrainedTaskModel | MemoryTaskModel:
    """The model ``config`` describes, for a task with these inputs and labels.

    Args:
        config: the model section of the run's configuration (the architecture's options).
        task: ``"token"`` (:class:`TokenClassifier`) or ``"sequence"``
            (:class:`SequenceClassifier` with ``config.pooling``).
        vocab_size: word ids for text input; ``None`` for vector input.
        char_vocab_size: character ids; used when ``config.char_features`` is on.
        feature_dim: F for vector input; ``None`` for text input.
        num_labels: number of classes.
        max_len: longest sequence expected (positional tables).
        edge_dim: features per graph edge, for the ``graph`` encoder.
        image_shape: ``(H, W, C)`` of image data, for the image models
            (:mod:`selfattn.models.vision`: patches, 2-D positions, ``cnn2d``).
        target_mean: regression (:class:`SequenceRegressor`): the training targets' mean.
        target_std: regression: their standard deviation.
        pretrained: a BERT checkpoint's config (``TaskSpec.pretrained``): a
            :class:`~selfattn.models.pretrained.PretrainedTaskModel` with random weights.

    Raises:
        ValueError: inconsistent inputs (both or neither of vocab_size and feature_dim,
            character features without a character vocabulary, an unknown task).
    """
    check_label_model(config, task=task, text=vocab_size is not None)
    checkpoint = getattr(config, "pretrained", None)
    if checkpoint is not None and pretrained is None:
        raise ValueError(
            f"model.pretrained = {checkpoint!r}: a pretrained checkpoint reads text; "
            "this data is not words"
            if vocab_size is None
            else f"model.pretrained = {checkpoint!r}, but the task was prepared "
            "without the checkpoint"
        )
    if pretrained is not None:
        assert isinstance(config, TransformerOptions), "model.pretrained is the transformer's"
        fine_tuned = build_pretrained_model(
            config,
            task=task,
            pretrained=pretrained,
            num_labels=num_labels,
            target_mean=target_mean,
            target_std=target_std,
            spec=TaskSpec(
                task=task,
                num_labels=num_labels,
                vocab_size=vocab_size,
                max_len=max_len,
                target_mean=target_mean,
                target_std=target_std,
                pretrained=pretrained,
            ),
        )
        if not config.exit_heads:
            return fine_tuned
        return build_pretrained_exit_model(config, fine_tuned, num_labels)
    if isinstance(config, MemN2NOptions):
        return _memory_model(config, task, vocab_size, num_labels, max_len)
    assert isinstance(config, EncoderOptions), "check_label_model: an encoder architecture"
    if config.char_features and vocab_size is not None and char_vocab_size is None:
        raise ValueError("model.char_features is on, but there is no character vocabulary")
    use_chars = config.char_features and vocab_size is not None
    spec = TaskSpec(
        task=task,
        num_labels=num_labels,
        vocab_size=vocab_size,
        char_vocab_size=char_vocab_size if use_chars else None,
        feature_dim=feature_dim,
        max_len=max_len,
        edge_dim=edge_dim,
        image_shape=image_shape,
        target_mean=target_mean,
        target_std=target_std,
    )
    return _encoder_model(config, spec)


def _encoder_model(config: EncoderOptions, spec: TaskSpec) -> TaskModel:
    """Input embedding → sequence encoder → the task's head (with a [CLS] vector first,
    and a classifier after every block, when the config asks), built in that order."""
    embedding: InputEmbedding | ImageEmbedding
    encoder: SequenceEncoder | None = None
    if uses_image(config):
        embedding, encoder = build_image_parts(config, spec.image_shape, task=spec.task)
    else:
        embedding = InputEmbedding(
            config.embed_dim,
            vocab_size=spec.vocab_size,
            feature_dim=spec.feature_dim,
            char_vocab_size=spec.char_vocab_size,
            char_dim=config.char_dim,
            word_dropout=config.word_dropout,
        )
    cls_token = ClsToken(config.embed_dim) if config.pooling == "cls" else None
    if encoder is None:
        # The [CLS] vector takes one position of the positional tables.
        encoder_len = spec.max_len + (cls_token is not None)
        encoder = build_encoder(config, max_len=encoder_len, edge_dim=spec.edge_dim)
    head = _head(config, spec, encoder.output_dim)
    if isinstance(config, ExitOptions) and config.exit_heads:
        assert isinstance(encoder, AttentionSequenceEncoder)  # check_fields: an attention stack
        assert not isinstance(head, SequenceRegressor)  # check_fields: classes to be sure of
        model: TaskModel = build_exit_model(
            config, embedding, encoder, head, spec=spec, cls_token=cls_token
        )
    else:
        model = TaskModel(embedding, encoder, head, spec=spec, cls_token=cls_token)
    use_layer_choices(model, config)
    return model


def _head(
    config: EncoderOptions, spec: TaskSpec, width: int
) -> TokenClassifier | SequenceClassifier | SequenceRegressor:
    """The head of ``spec.task`` on ``width``-wide encoder outputs."""
    if spec.task == "token":
        return TokenClassifier(width, spec.num_labels, dropout=config.head_rate)
    if spec.task in ("sequence", "multilabel"):  # multilabel: one sigmoid logit per label
        return SequenceClassifier(
            width, spec.num_labels, pooling=config.pooling, dropout=config.head_rate
        )
    if spec.task == "regression":
        return SequenceRegressor(
            width,
            pooling=config.pooling,
            dropout=config.head_rate,
            target_mean=spec.target_mean,
            target_std=spec.target_std,
        )
    raise ValueError(
        f"unknown task {spec.task!r}; choose 'token', 'sequence', 'multilabel' or 'regression'"
    )


def _memory_model(
    config: MemN2NOptions, task: TaskType, vocab_size: int | None, num_labels: int, max_len: int
) -> MemoryTaskModel:
    """The memory network of ``config`` (:mod:`selfattn.models.memory`; the task was
    checked by :func:`check_label_model`)."""
    if vocab_size is None:
        raise ValueError(
            'model.architecture = "memn2n" reads stories of words; this data is not words'
        )
    spec = TaskSpec(task=task, num_labels=num_labels, vocab_size=vocab_size, max_len=max_len)
    return MemoryTaskModel(config, vocab_size=vocab_size, num_labels=num_labels, spec=spec)


def input_length_limit(model: nn.Module) -> tuple[int, str] | None:
    """The longest input ``model`` can read and why, or ``None`` when any length works.

    Sinusoidal, relative, rotary, ALiBi, FLOATER and RNN positions (and none) extend to
    any length; a learned positional table (without ``extrapolation="clamp"``) ends at
    its last row, and Linformer's projections have one column per position.
    """
    # A [CLS] vector takes one of the positions the tables cover.
    prefix = int(isinstance(model, TaskModel) and model.cls_token is not None)
    limits: list[tuple[int, str]] = []
    for module in model.modules():
        if isinstance(module, LearnedPositional) and module.extrapolation == "error":
            limits.append((module.max_len - prefix, "its learned positional table ends there"))
        elif isinstance(module, LinformerKernel):
            limits.append((module.max_len - prefix, "its linformer projections end there"))
    return min(limits) if limits else None


def build_model_from_spec(
    config: ModelOptions, spec: TaskSpec
) -> TaskModel | PretrainedTaskModel | MemoryTaskModel:
    """:func:`build_model` with the inputs and labels of a stored :class:`TaskSpec`."""
    return build_model(config, **spec.model_fields())
