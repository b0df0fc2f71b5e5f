"""The architecture table: :class:`Architecture` records in :data:`ARCHITECTURES`, filled
by :func:`register_architecture`, and the ``[model]`` section read through it.

This module imports no architecture: each file of :mod:`selfattn.models.architectures`
registers its own options class, and importing that package imports every one of them
(``from selfattn.models.architectures import ARCHITECTURES`` gives the full table).

>>> ARCHITECTURES["bigru"].options.field_names()
('architecture', 'embed_dim', 'num_layers', 'ffn_dim', ...)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from selfattn.models.option_groups import ModelOptions

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
    """

    name: str
    options: type[ModelOptions]
    summary: str
    produces: frozenset[Product]
    losses: tuple[str, ...] = ()
    encoder: Any = None


#: Every registered architecture by name (import it from
#: :mod:`selfattn.models.architectures`, which registers them all).
ARCHITECTURES: dict[str, Architecture] = {}

_O = TypeVar("_O", bound=type[ModelOptions])


def register_architecture(
    name: str,
    *,
    summary: str,
    produces: set[Product],
    losses: tuple[str, ...] = (),
    encoder: Any = None,
) -> Callable[[_O], _O]:
    """Class decorator: add an options class to :data:`ARCHITECTURES` as ``name``.

    Raises:
        ValueError: the name is taken, or the class's ``architecture`` default differs.
    """

    def register(cls: _O) -> _O:
        if name in ARCHITECTURES and ARCHITECTURES[name].options is not cls:
            raise ValueError(f"architecture {name!r} is already registered")
        if cls().architecture != name:
            raise ValueError(f"{cls.__name__}.architecture must default to {name!r}")
        ARCHITECTURES[name] = Architecture(name, cls, summary, frozenset(produces), losses, encoder)
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
