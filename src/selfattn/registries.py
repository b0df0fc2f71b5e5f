"""The one registry type behind selfattn's tables of named things: the attention kernels
(:data:`selfattn.kernels.KERNELS`), the architectures
(:data:`selfattn.models.registry.ARCHITECTURES`), the datasets
(:data:`selfattn.data.registry.RECIPES`) and the task types
(:data:`selfattn.tasks.task.TASKS`).

A :class:`Registry` reads as the plain ``dict`` it is (``KERNELS["dense"]``, ``in``, its
names in registration order); what each registration decorator shares is here: a name
taken by something else is refused, and so is a name nothing has, each in one line.

>>> COLOURS: Registry[str] = Registry("colour")
>>> COLOURS.add("red", "#f00")
'#f00'
>>> COLOURS.named("blue")
Traceback (most recent call last):
    ...
ValueError: unknown colour 'blue'; choose one of red
"""

from __future__ import annotations

from typing import Any, TypeVar, cast

_V = TypeVar("_V")
_C = TypeVar("_C", bound=type[Any])


class Registry(dict[str, _V]):
    """Things of one kind by name.

    Args:
        kind: what one of them is called in a refusal (``"attention kernel"``).
    """

    def __init__(self, kind: str) -> None:
        super().__init__()
        self.kind = kind

    def add(self, name: str, item: _V) -> _V:
        """Register ``item`` as ``name`` and return it; registering an equal item again
        changes nothing.

        Raises:
            ValueError: ``name`` is empty, or holds something else.
        """
        if not name:
            raise ValueError(f"a {self.kind} needs a non-empty name")
        if name in self and self[name] != item:
            raise ValueError(f"{self.kind} {name!r} is already registered")
        self[name] = item
        return item

    def add_class(self, cls: _C) -> _C:
        """Register a class under its ``name`` attribute (a class decorator's body).

        Raises:
            ValueError: ``cls.name`` is missing or empty, or holds something else.
        """
        if not getattr(cls, "name", None):
            raise ValueError(f"{cls.__name__} needs a non-empty class attribute 'name'")
        self.add(cls.name, cast(_V, cls))
        return cls

    def named(self, name: str) -> _V:
        """The thing registered as ``name``.

        Raises:
            ValueError: nothing is (one line listing the names there are).
        """
        if name not in self:
            raise ValueError(f"unknown {self.kind} {name!r}; choose one of {self.choices()}")
        return self[name]

    def choices(self) -> str:
        """The registered names, sorted, for a message: ``"a, b, c"``."""
        return ", ".join(sorted(self))
