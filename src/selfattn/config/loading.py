"""A run's configuration: frozen dataclasses loaded from TOML, overridable field by field.

    run_dir = "runs/pos"          # optional; default runs/<config file name>
    [data]
    dataset = "pos-wsj"
    [model]
    architecture = "transformer"
    [train]
    epochs = 20

``--set section.field=value`` overrides a field; the value is read as a TOML literal
(``3``, ``0.5``, ``true``, ``"x"``) and, failing that, as a plain string. TOML has no
null, so an optional field is set to ``None`` with the string ``"none"``. Every key and
type is checked against the dataclasses, with errors that name the field.
"""

from __future__ import annotations

import contextlib
import dataclasses
import re
import tomllib
import types
import typing
from collections.abc import Mapping
from dataclasses import fields
from pathlib import Path
from typing import Any, Literal, Union

from selfattn.config.sections import Config, DataConfig, TrainConfig
from selfattn.models.architectures import ARCHITECTURES
from selfattn.models.option_groups import ModelOptions
from selfattn.models.registry import model_options
from selfattn.models.seq2seq_options import Seq2SeqConfig

#: Each section's dataclass; ``[model]``'s is the options class its ``architecture`` picks.
SECTIONS: dict[str, type] = {
    "data": DataConfig,
    "model": ModelOptions,
    "train": TrainConfig,
    "seq2seq": Seq2SeqConfig,
}
_TOP_LEVEL = ("run_dir",)
#: ``section.field`` as the validation errors name a field.
_FIELD_NAMES = re.compile(rf"\b(?:{'|'.join(SECTIONS)})\.\w+\b")


def load_config(path: Path, overrides: list[str] | None = None) -> Config:
    """Read a TOML configuration and apply ``section.field=value`` overrides.

    Args:
        path: the TOML file. Without a top-level ``run_dir``, the run goes to
            ``runs/<file name without .toml>``.
        overrides: ``"section.field=value"`` strings (``"run_dir=path"`` for the folder).

    Raises:
        ValueError: one line: unreadable TOML (with the file's name, line and column),
            an unknown section or key (the message lists the valid ones), a value of the
            wrong type or out of range (naming the field, and the file or the ``--set``
            override it came from).
    """
    path = Path(path)
    try:
        values = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as error:  # its message ends "(at line L, column C)"
        raise ValueError(f"{path}: invalid TOML: {error}") from None
    except UnicodeDecodeError as error:
        raise ValueError(f"{path}: not UTF-8 text ({error.reason} at byte {error.start})") from None
    except OSError as error:
        raise ValueError(f"cannot read config {path}: {error.strerror}") from None
    values.setdefault("run_dir", str(Path("runs") / path.stem))
    set_by: dict[str, str] = {}  # a field → the --set that gave its value (the last one)
    for override in overrides or []:
        apply_override(values, override)
        set_by[override.partition("=")[0].strip()] = override
    try:
        return config_from_dict(values)
    except ValueError as error:
        # Say where the bad value was written: the --set of a field the error names, else
        # the file.
        culprit = _written_by(str(error), set_by)
        if culprit is not None:
            raise ValueError(f"{error} (from --set {culprit})") from None
        raise ValueError(f"{path}: {error}") from None


def _written_by(message: str, set_by: Mapping[str, str]) -> str | None:
    """The ``--set`` that gave the value of a field ``message`` names (the first such
    field), or ``None`` if each field it names comes from the file."""
    named = _FIELD_NAMES.findall(message)
    if message.startswith(_TOP_LEVEL):
        named.insert(0, message.split(":")[0].split()[0])
    return next((set_by[name] for name in named if name in set_by), None)


def apply_override(values: dict[str, Any], override: str) -> None:
    """Set ``section.field`` (or a top-level key) in the raw ``values`` to ``value``."""
    key, sep, raw = override.partition("=")
    if not sep:
        raise ValueError(f"override {override!r} is not of the form section.field=value")
    parts = key.strip().split(".")
    if len(parts) == 1 and parts[0] in _TOP_LEVEL:
        values[parts[0]] = parse_value(raw)
        return
    if len(parts) != 2:
        raise ValueError(
            f"override {override!r}: the key must be section.field (sections: "
            f"{', '.join(SECTIONS)}) or one of {', '.join(_TOP_LEVEL)}"
        )
    section, name = parts
    _check_section(section)
    table = values.setdefault(section, {})
    if not isinstance(table, dict):
        raise ValueError(f"[{section}] must be a table")
    table[name] = parse_value(raw)


def parse_value(raw: str) -> Any:
    """A TOML literal (``3``, ``0.5``, ``true``, ``"x"``, ``[1, 2]``), else the raw string."""
    raw = raw.strip()
    try:
        return tomllib.loads(f"value = {raw}")["value"]
    except tomllib.TOMLDecodeError:
        return raw


def config_from_dict(values: Mapping[str, Any]) -> Config:
    """Build and validate a :class:`Config` from nested plain values (TOML or JSON).

    ``[model]`` is read by the options class of its ``architecture``. A run folder written
    while ``[model]`` was one flat section stores every field; the ones its architecture
    does not read hold a default (today's or a former one,
    :data:`~selfattn.models.registry.FORMER_DEFAULTS`), as the builders that wrote them
    required, and are dropped (:func:`~selfattn.models.registry.model_options`).
    """

    unknown = sorted(set(values) - set(SECTIONS) - set(_TOP_LEVEL))
    if unknown:
        valid = ", ".join([*(f"[{name}]" for name in SECTIONS), *_TOP_LEVEL])
        raise ValueError(f"unknown config section(s) {', '.join(unknown)}; valid: {valid}")
    if "data" not in values:
        raise ValueError("config: the [data] section (with data.dataset) is required")
    sections = {name: _build_section(name, values.get(name, {})) for name in SECTIONS}
    run_dir = _coerce(values.get("run_dir", "runs/run"), Path, "run_dir")
    return Config(run_dir=run_dir, **sections)


def config_to_dict(config: Config) -> dict[str, Any]:
    """Nested plain values (JSON-ready); :func:`config_from_dict` inverts it."""
    out: dict[str, Any] = {name: dataclasses.asdict(getattr(config, name)) for name in SECTIONS}
    out["run_dir"] = str(config.run_dir)
    return out


def config_to_toml(config: Config) -> str:
    """The configuration as TOML text that :func:`load_config` reads back unchanged."""
    values = config_to_dict(config)
    lines = [f"run_dir = {toml_literal(values.pop('run_dir'))}"]
    for section, table in values.items():
        lines += ["", f"[{section}]"]
        lines += [f"{key} = {toml_literal(value)}" for key, value in table.items()]
    return "\n".join(lines) + "\n"


def toml_literal(value: Any) -> str:
    """``value`` as the TOML literal :func:`parse_value` reads back (``None`` as
    ``"none"``, a path as its string, a list as an array)."""
    if value is None:
        return '"none"'
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, Path):
        value = str(value)
    if isinstance(value, str):
        escaped = value.replace("\\", "\\\\").replace('"', '\\"')
        return f'"{escaped}"'
    if isinstance(value, list | tuple):
        return "[" + ", ".join(toml_literal(item) for item in value) + "]"
    raise TypeError(f"cannot write {value!r} as TOML")


# ------------------------------------------------------------------------- validation


def _check_section(section: str) -> None:
    if section not in SECTIONS:
        raise ValueError(
            f"unknown config section {section!r}; valid sections: {', '.join(SECTIONS)}"
        )


def _build_model(table: Mapping[str, Any]) -> ModelOptions:
    """``[model]`` as the options of its architecture: each key coerced by the type of the
    field that declares it, then :func:`~selfattn.models.registry.model_options` (a key of
    another architecture is dropped when unset, so that one file can serve several
    architectures and older run folders load, else refused)."""
    name = _coerce(table.get("architecture", "transformer"), str, "model.architecture")
    hints = {
        key: hint
        for entry in reversed(ARCHITECTURES.values())
        for key, hint in typing.get_type_hints(entry.options).items()
    }
    values = {
        key: _coerce(value, hints[key], f"model.{key}") if key in hints else value
        for key, value in table.items()
    }
    return model_options(**{**values, "architecture": name})


def _build_section(section: str, table: Any) -> Any:
    cls = SECTIONS[section]
    if not isinstance(table, Mapping):
        raise ValueError(f"[{section}] must be a table, got {table!r}")
    if section == "model":
        return _build_model(table)
    hints = typing.get_type_hints(cls)
    names = [f.name for f in fields(cls)]
    unknown = sorted(set(table) - set(names))
    if unknown:
        raise ValueError(
            f"unknown key(s) {', '.join(f'{section}.{key}' for key in unknown)}; "
            f"valid keys of [{section}]: {', '.join(names)}"
        )
    required = [
        f.name
        for f in fields(cls)
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    ]
    missing = [name for name in required if name not in table]
    if missing:
        raise ValueError(f"missing required key(s): {', '.join(f'{section}.{m}' for m in missing)}")
    kwargs = {key: _coerce(value, hints[key], f"{section}.{key}") for key, value in table.items()}
    return cls(**kwargs)


def _coerce(value: Any, hint: Any, name: str) -> Any:
    """``value`` as type ``hint``, or a ValueError naming the field, the type and the value."""
    origin = typing.get_origin(hint)
    if origin is Union or origin is types.UnionType:
        options = typing.get_args(hint)
        if type(None) in options and (value is None or _is_none_word(value)):
            return None
        for option in (o for o in options if o is not type(None)):
            with contextlib.suppress(ValueError):
                return _coerce(value, option, name)
        raise ValueError(f"{name}: expected {_type_name(hint)}, got {value!r}")
    if origin is Literal:
        choices = typing.get_args(hint)
        if any(value == c and type(value) is type(c) for c in choices):
            return value
        raise ValueError(
            f"{name}: expected one of {', '.join(repr(c) for c in choices)}, got {value!r}"
        )
    if hint is bool:
        if isinstance(value, bool):
            return value
    elif hint is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    elif hint is float:
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
    elif hint is str:
        if isinstance(value, str):
            return value
    elif hint is Path:
        if isinstance(value, str | Path):
            return Path(value)
    else:  # pragma: no cover - a field type this module does not know
        raise TypeError(f"{name}: unsupported field type {hint!r}")
    raise ValueError(f"{name}: expected {_type_name(hint)}, got {value!r}")


def _is_none_word(value: Any) -> bool:
    return isinstance(value, str) and value.lower() == "none"


def _type_name(hint: Any) -> str:
    origin = typing.get_origin(hint)
    if origin is Union or origin is types.UnionType:
        return " or ".join(
            "none" if option is type(None) else _type_name(option)
            for option in typing.get_args(hint)
        )
    if origin is Literal:
        return "one of " + ", ".join(repr(c) for c in typing.get_args(hint))
    if hint is Path:
        return "path (str)"
    return getattr(hint, "__name__", str(hint))
