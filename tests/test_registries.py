"""The registry type behind the kernels, architectures, recipes and task types: a name is
taken once, an unknown one is refused in one line listing the names there are."""

from __future__ import annotations

import pytest

from selfattn.data.registry import RECIPES
from selfattn.kernels import KERNELS
from selfattn.models.architectures import ARCHITECTURES
from selfattn.registries import Registry
from selfattn.tasks import TASKS


def test_a_name_is_taken_once_and_an_unknown_one_lists_the_names() -> None:
    colours: Registry[str] = Registry("colour")
    assert colours.add("red", "#f00") == "#f00"
    colours.add("red", "#f00")  # the same again changes nothing
    colours.add("green", "#0f0")
    with pytest.raises(ValueError, match=r"^colour 'red' is already registered$"):
        colours.add("red", "#e00")
    with pytest.raises(ValueError, match=r"^a colour needs a non-empty name$"):
        colours.add("", "#000")
    with pytest.raises(ValueError, match=r"^unknown colour 'blue'; choose one of green, red$"):
        colours.named("blue")
    assert colours.named("green") == "#0f0" and list(colours) == ["red", "green"]


def test_a_class_registers_under_its_name_attribute() -> None:
    shapes: Registry[type] = Registry("shape")

    class Square:
        name = "square"

    class Nameless:
        name = ""

    assert shapes.add_class(Square) is Square and shapes["square"] is Square
    with pytest.raises(ValueError, match=r"^Nameless needs a non-empty class attribute 'name'$"):
        shapes.add_class(Nameless)


@pytest.mark.parametrize(
    ("table", "kind"),
    [
        (KERNELS, "attention kernel"),
        (ARCHITECTURES, "architecture"),
        (RECIPES, "recipe"),
        (TASKS, "task type"),
    ],
)
def test_every_table_of_named_things_is_one(table: object, kind: str) -> None:
    assert isinstance(table, Registry) and table.kind == kind and len(table) > 0
