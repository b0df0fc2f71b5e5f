"""Numbers enter a run through its configuration: every float field of every section
refuses nan and ±inf at load, in one line naming the field and the range it takes."""

from __future__ import annotations

import dataclasses
import re
import typing
from typing import Any

import pytest

from selfattn.config import SECTIONS, TrainConfig, load_config
from selfattn.config.sequence_fields import SEQUENCE_DEFAULTS

from ..helpers_scripts import CONFIGS

CONFIG = CONFIGS / "karate.toml"


def _float_fields() -> list[Any]:
    """``(section, field)`` for every field that holds a float, walked from the sections."""
    found = []
    for section, cls in SECTIONS.items():
        hints = typing.get_type_hints(cls)
        for item in dataclasses.fields(cls):
            if float in (typing.get_args(hints[item.name]) or (hints[item.name],)):
                found.append(pytest.param(section, item.name, id=f"{section}.{item.name}"))
    return found


def _reaching(section: str, name: str) -> list[str]:
    """The overrides that make ``section.name`` read (sequence-level fields need an
    objective that reads them)."""
    return ["train.objective=mrt"] if section == "train" and name in SEQUENCE_DEFAULTS else []


@pytest.mark.parametrize("value", ["nan", "inf", "-inf"])
@pytest.mark.parametrize(("section", "name"), _float_fields())
def test_every_float_field_refuses_what_is_not_finite(section: str, name: str, value: str) -> None:
    override = f"{section}.{name}={value}"
    with pytest.raises(ValueError) as info:
        load_config(CONFIG, [*_reaching(section, name), override])
    message = str(info.value)
    assert "\n" not in message
    assert re.match(rf"^{section}\.{name} must be .*, got {value}", message), message
    assert message.endswith(f"(from --set {override})")


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("train.lr=inf", r"^train\.lr must be finite and in \(0, 10\], got inf"),
        ("train.lr=1e4", r"^train\.lr must be in \(0, 10\], got 10000\.0"),
        ("train.lr=0", r"^train\.lr must be in \(0, 10\], got 0\.0"),
        ("train.weight_decay=nan", r"^train\.weight_decay must be finite and >= 0, got nan"),
        ("train.grad_clip=inf", r"^train\.grad_clip must be finite and > 0 or none, got inf"),
        ("train.max_minutes=inf", r"^train\.max_minutes must be finite and > 0 or none, got inf"),
        ("data.max_len=1099511627776", r"^data\.max_len must be in \[1, 1048576\]"),
    ],
)
def test_refusals_name_the_range(override: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        load_config(CONFIG, [override])


def test_the_python_api_refuses_them_too() -> None:
    with pytest.raises(ValueError, match=r"^train\.lr must be finite and in \(0, 10\], got nan$"):
        TrainConfig(lr=float("nan"))


def test_real_settings_still_load() -> None:
    config = load_config(CONFIG, ["train.lr=10", "train.weight_decay=0.5", "data.max_len=65536"])
    assert (config.train.lr, config.train.weight_decay, config.data.max_len) == (10, 0.5, 65536)
