"""The architecture table: :class:`Architecture` records in :data:`ARCHITECTURES`, filled
by :func:`register_architecture`, and the ``[model]`` section read through it: the
options class is picked by ``architecture`` (:func:`model_options`), and another
architecture's options are made from the fields it shares (:func:`options_for`).

This module imports no architecture: each file of :mod:`selfattn.models.architectures`
registers its own options class, and importing that package imports every one of them
(``from selfattn.models.architectures import ARCHITECTURES`` gives the full table).

>>> ARCHITECTURES["bigru"].options.field_names()
('architecture', 'embed_dim', 'num_layers', 'ffn_dim', ...)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from selfattn.models.option_groups import ModelOptions, toml_value
from selfattn.registries import Registry

#: What an architecture gives a task (a task type accepts some, ``Task.accepts``):
#: ``vectors``: one vector per input vector (a token, sequence, regression or multi-label
#: head goes on top); ``image_vectors``: the same over an image grid only, for a label per
#: image; ``encoder_stack``: a stack of attention blocks that can be the encoder of the
#: Transformer encoder–decoder; ``answer``: one answer per input set read over hops (the
#: memory network); ``bit_steps``: a vector of bit logits per step (the copy tasks);
#: ``sequence``: an output sequence of its own (an encoder–decoder).
Product = Literal["vectors", "image_vectors", "encoder_stack", "answer", "bit_steps", "sequence"]


@dataclass(frozen=True)
class Architecture:
    """One ``model.architecture``.

    Attributes:
        name: the ``model.architecture`` value.
        options: its frozen options dataclass (exactly the fields it reads).
        summary: one line saying what it is.
        produces: what it gives a task (:data:`Product`); a task type accepts some.
        losses: what it adds to the task's loss, one phrase each (``selfattn config``).
        encoder: the sequence encoder an embedding feeds and a head reads (a
            :class:`~selfattn.models.encoders.SequenceEncoder`), for the architectures
            that have one; ``None`` for those that are a whole model of their own.
        cls_token: its encoder can read a learned [CLS] vector put before every input
            (``pooling = "cls"``): it attends from every position to every other.
    """

    name: str
    options: type[ModelOptions]
    summary: str
    produces: frozenset[Product]
    losses: tuple[str, ...] = ()
    encoder: Any = None
    cls_token: bool = False


#: Every registered architecture by name (import it from
#: :mod:`selfattn.models.architectures`, which registers them all).
ARCHITECTURES: Registry[Architecture] = Registry("architecture")

_O = TypeVar("_O", bound=type[ModelOptions])


def register_architecture(
    name: str,
    *,
    summary: str,
    produces: set[Product],
    losses: tuple[str, ...] = (),
    encoder: Any = None,
    cls_token: bool = False,
) -> Callable[[_O], _O]:
    """Class decorator: add an options class to :data:`ARCHITECTURES` as ``name``.

    Raises:
        ValueError: the name is taken, or the class's ``architecture`` default differs.
    """

    def register(cls: _O) -> _O:
        if cls().architecture != name:
            raise ValueError(f"{cls.__name__}.architecture must default to {name!r}")
        entry = Architecture(name, cls, summary, frozenset(produces), losses, encoder, cls_token)
        ARCHITECTURES.add(name, entry)
        return cls

    return register


def architecture_named(name: str) -> Architecture:
    """The registered architecture ``name``.

    Raises:
        ValueError: no such architecture (one line listing them).
    """
    if name not in ARCHITECTURES:
        # The default first, then the others by name.
        names = sorted(ARCHITECTURES, key=lambda other: (other != "transformer", other))
        raise ValueError(
            f"model.architecture: expected one of {', '.join(map(repr, names))} (an unknown "
            f"architecture), got {name!r}"
        )
    return ARCHITECTURES[name]


def cls_architectures() -> tuple[str, ...]:
    """The registered architectures that read a [CLS] vector (``pooling = "cls"``)."""
    return tuple(name for name, entry in ARCHITECTURES.items() if entry.cls_token)


def model_keys() -> tuple[str, ...]:
    """Every ``[model]`` key some registered architecture reads, in registration order."""
    keys = {name: None for entry in ARCHITECTURES.values() for name in entry.options.field_names()}
    return tuple(keys)


def field_default(name: str) -> Any:
    """The default of ``[model]`` field ``name`` (every architecture that reads it has the
    same one).

    Raises:
        KeyError: no registered architecture reads ``name``.
    """
    for entry in ARCHITECTURES.values():
        for item in dataclasses.fields(entry.options):
            if item.name == name:
                return item.default
    raise KeyError(name)


#: The defaults these fields had before their BERT-style and CPU-faster ones. Configs and
#: run folders written while ``[model]`` was one flat dataclass hold every field, and those
#: of before the change hold these: where a model (or the task) does not read the field,
#: they mean "unset" as today's default does, so those files still load.
FORMER_DEFAULTS: dict[str, Any] = {
    "ffn_dropout": None,
    "head_dropout": None,
    "dropout_masks": "bernoulli",
    "linear_layers": "torch",
}


def unset(name: str, value: Any) -> bool:
    """Whether ``value`` of field ``name`` is its default, or its former one
    (:data:`FORMER_DEFAULTS`): what a model or a task that does not read it accepts."""
    return value == field_default(name) or (
        name in FORMER_DEFAULTS and value == FORMER_DEFAULTS[name]
    )


def model_options(architecture: str = "transformer", **values: Any) -> ModelOptions:
    """The options of ``architecture`` with ``values`` (its other fields at their defaults).

    A field ``architecture`` does not read is left out when it is unset (:func:`unset`, or
    ``positional = "none"``, what an architecture without positions has): configs and run
    folders written while ``[model]`` was one flat section hold every field, and one
    ``[model]`` table can serve several architectures. Set to anything else, it is refused.

    >>> model_options("bigru", embed_dim=64, num_heads=4)
    BiGRUOptions(architecture='bigru', embed_dim=64, ...)

    Raises:
        ValueError: an unknown architecture, a field it does not read set to a value, or a
            bad value (one line, naming the fields ``architecture`` reads).
    """
    options = architecture_named(architecture).options
    reads = options.field_names()
    unknown = sorted(set(values) - set(model_keys()))
    if unknown:
        raise ValueError(
            f"unknown key(s) {', '.join(f'model.{key}' for key in unknown)}; valid keys of "
            f"[model]: {', '.join(model_keys())}; architecture {architecture!r} reads: "
            f"{', '.join(reads)} (selfattn config {architecture})"
        )
    for name, value in values.items():
        if name not in reads and not (
            unset(name, value) or (name == "positional" and value is None)
        ):
            raise ValueError(
                f"model.{name} = {toml_value(value)}: architecture {architecture!r} does not "
                f"use it; leave it at its default ({toml_value(field_default(name))}) or out "
                f"({architecture} reads: {', '.join(reads)})"
            )
    return options(**{name: value for name, value in values.items() if name in reads})


def options_for(options: ModelOptions, architecture: str) -> ModelOptions:
    """The options of ``architecture`` made of the fields of ``options`` it reads (the rest
    at its defaults), so the same section can train every architecture (``selfattn demo``
    compares the baselines this way)."""
    reads = architecture_named(architecture).options.field_names()
    shared = {name: value for name, value in vars(options).items() if name in reads}
    return model_options(**{**shared, "architecture": architecture})
