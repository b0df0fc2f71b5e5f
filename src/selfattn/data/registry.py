"""The recipe table: :class:`Recipe` (a named dataset) and :data:`RECIPES`, filled by
:func:`register`.

This module imports no recipe: each recipe module (:mod:`selfattn.data.recipes`) imports
it and calls :func:`register` for its own recipes, and importing the
:mod:`selfattn.data.recipes` package imports every recipe module, so the table is full
once that package is imported (``from selfattn.data import RECIPES`` does it). The
dependencies point one way — recipes → registry — so there is no import circle.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from selfattn.data.fetch.sources import Source
from selfattn.datatypes import DatasetSplits, Example, InputKind, TaskType
from selfattn.registries import Registry

#: The licence note of a corpus that may be loaded for research but not redistributed.
LOAD_ONLY = "research / personal use: load it, never redistribute it"


@dataclass(frozen=True)
class Recipe:
    """A named dataset: where it comes from and how it is split.

    Attributes:
        task: the output type; a seq2seq recipe says so here, since its labels (a tuple
            of target tokens) look like a token task's.
        source: a :class:`PyPISource`, :class:`DebianSource` or :class:`GeneratedSource`.
        build: turns the cached files (``source.fetch()``, in order; none for generated
            data) into splits.
    """

    name: str
    task: TaskType
    input: InputKind
    description: str
    source: Source
    licence: str
    build: Callable[[Recipe, list[Path]], DatasetSplits] = field(repr=False)

    def is_fetched(self) -> bool:
        """Whether :meth:`load` can run without the network."""
        return self.source.is_fetched()

    def fetch(self) -> list[Path]:
        """Download (if needed) and return the cached files (none for generated data)."""
        return self.source.fetch()

    def load(self) -> DatasetSplits:
        """The dataset's fixed train / dev / test splits, fetching it first if needed."""
        return self.build(self, self.fetch())

    def splits(
        self, train: list[Example], dev: list[Example], test: list[Example]
    ) -> DatasetSplits:
        """Wrap split lists with this recipe's metadata."""
        return DatasetSplits(
            name=self.name,
            task=self.task,
            input=self.input,
            train=train,
            dev=dev,
            test=test,
            description=self.description,
            extra={"source": self.source.origin(), "licence": self.licence},
        )


#: Every registered recipe by name. Import it from :mod:`selfattn.data.recipes` (or
#: :mod:`selfattn.data`), which imports every recipe module first: this module alone
#: holds only the recipes whose modules were imported so far.
RECIPES: Registry[Recipe] = Registry("recipe")


def register(*recipes: Recipe) -> None:
    """Add ``recipes`` to :data:`RECIPES`.

    Raises:
        ValueError: a recipe's name is already registered (two recipes, one name).
    """
    for recipe in recipes:
        RECIPES.add(recipe.name, recipe)


__all__ = ["LOAD_ONLY", "RECIPES", "Recipe", "register"]
