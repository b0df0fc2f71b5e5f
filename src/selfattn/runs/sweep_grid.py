"""A sweep's plan: the ``--grid`` / ``--seeds`` / ``--set`` of ``selfattn sweep`` parsed and
validated, and the members named (one run folder each under the sweep's folder), before
anything is trained or written. Every combination is validated with the config loader
(field names, types, ranges, what the architecture reads) before any member starts;
``OUT/sweep.json`` records the fields each config shared when the sweep was started, and a
folder holding the runs of another config is refused. Several configs make one more axis
of the grid, ``config`` (each file's stem), the first of every combination.
"""

from __future__ import annotations

import itertools
import json
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from selfattn.config import Config, config_to_dict, load_config, parse_value
from selfattn.runs.table import flatten, format_value
from selfattn.tasks.run import check_with_files
from selfattn.train.run_dir import HARMLESS_CHANGES

SWEEP_FILE = "sweep.json"
#: The axis of the configs' stems when a sweep has several configs.
CONFIG_AXIS = "config"
#: Fields that may differ between a sweep's runs and its record without making them
#: another config's (how a run is executed, not what it trains).
EXECUTION_FIELDS = ("run_dir", "train.threads", "train.device", *HARMLESS_CHANGES)
_NAME_CHARACTERS = re.compile(r"[^A-Za-z0-9._+=-]+")


@dataclass(frozen=True)
class GridAxis:
    """One ``--grid section.field=v1,v2,…``: the field and its values as written."""

    field: str
    values: tuple[str, ...]

    @property
    def short(self) -> str:
        return self.field.split(".")[-1]


@dataclass
class Member:
    """One run of the sweep: a combination of grid values and a seed."""

    name: str
    values: dict[str, str]
    seed: int
    overrides: list[str]
    run_dir: Path
    config: Config
    config_path: Path

    @property
    def combination(self) -> tuple[str, ...]:
        return tuple(self.values.values())


@dataclass
class Sweep:
    """A validated sweep, ready to run: ``axes`` are the ``--grid`` fields, ``columns``
    the values that name a combination (the ``config`` axis first when there are
    several configs)."""

    config_paths: list[Path]
    axes: list[GridAxis]
    seeds: list[int]
    sets: list[str]
    out: Path
    members: list[Member] = field(default_factory=list)
    #: The task types of the user's files read while planning, by data setting.
    files_read: dict[tuple[Any, ...], str] = field(default_factory=dict, repr=False)

    @property
    def columns(self) -> list[GridAxis]:
        if len(self.config_paths) == 1:
            return list(self.axes)
        return [GridAxis(CONFIG_AXIS, tuple(p.stem for p in self.config_paths)), *self.axes]

    def bases(self) -> dict[str, dict[str, Any]]:
        """Each config's stem → the fields all its members share."""
        firsts = {m.config_path.stem: m.config for m in reversed(self.members)}
        return {stem: shared_fields(firsts[stem], self.axes) for stem in self.configs()}

    def configs(self) -> dict[str, str]:
        return {path.stem: str(path) for path in self.config_paths}

    def record(self) -> dict[str, Any]:
        """What ``sweep.json`` holds: each config and the fields its members share, the
        grid, the seeds and the members."""
        return {
            "configs": self.configs(),
            "bases": self.bases(),
            "grid": {axis.field: list(axis.values) for axis in self.axes},
            "seeds": self.seeds,
            "sets": self.sets,
            "members": {m.name: {"values": m.values, "seed": m.seed} for m in self.members},
        }


# ----------------------------------------------------------------------- parsing


def parse_axis(text: str) -> GridAxis:
    """``section.field=v1,v2,…`` as a :class:`GridAxis`.

    Raises:
        ValueError: one line: not ``section.field=values``, an empty value, a value
            given twice, ``train.seed`` (that is ``--seeds``) or ``run_dir``.
    """
    name, sep, raw = text.partition("=")
    name = name.strip()
    if not sep or "." not in name or not raw.strip():
        raise ValueError(f"--grid {text!r} is not of the form section.field=value1,value2,…")
    if name == "train.seed":
        raise ValueError("--grid train.seed: give the seeds with --seeds 0,1,2")
    values = tuple(value.strip() for value in raw.split(","))
    if any(not value for value in values):
        raise ValueError(f"--grid {text}: an empty value")
    repeated = sorted({v for v in values if values.count(v) > 1})
    if repeated:
        raise ValueError(f"--grid {text}: {', '.join(repeated)} given twice")
    return GridAxis(name, values)


def parse_seeds(text: str) -> list[int]:
    """``0,1,2`` as seeds.

    Raises:
        ValueError: a seed that is not a whole number ≥ 0, or one given twice.
    """
    seeds = []
    for part in text.split(","):
        part = part.strip()
        if not part.isdigit():
            raise ValueError(f"--seeds {text}: {part!r} is not a seed (a whole number >= 0)")
        seeds.append(int(part))
    if len(set(seeds)) != len(seeds):
        raise ValueError(f"--seeds {text}: a seed given twice")
    return seeds


def member_name(values: dict[str, str], axes: Sequence[GridAxis], seed: int) -> str:
    """``score=dot_normalizer=softmax_seed=0``: each grid value after its field's name
    (the whole ``section.field`` when two sections share the name), then the seed."""
    shorts = [axis.short for axis in axes]
    parts = []
    for axis in axes:
        label = axis.short if shorts.count(axis.short) == 1 else axis.field
        parts.append(f"{label}={values[axis.field]}")
    parts.append(f"seed={seed}")
    return _NAME_CHARACTERS.sub("-", "_".join(parts))


# ----------------------------------------------------------------------- planning


def plan(
    config_paths: Path | Sequence[Path],
    grid: Sequence[str],
    seeds: Sequence[int] | None,
    sets: Sequence[str],
    out: Path | None,
    jobs: int,
) -> Sweep:
    """Validate a sweep of one config or several and name its members; nothing is
    trained or written. Without ``out``: the first config's ``run_dir`` + ``-sweep``.

    Raises:
        ValueError: one line: a bad ``--grid`` / ``--seeds`` / ``--jobs``, a grid field a
            config's architecture does not read or a value of the wrong type (naming the
            combination), a ``--set`` of ``run_dir`` or ``train.seed`` with ``--seeds``,
            a config given twice or two configs of one stem, or ``out`` holding the runs
            of another config.
    """
    paths = [Path(config_paths)] if isinstance(config_paths, str | Path) else list(config_paths)
    check_configs(paths)
    cores = os.cpu_count() or 1
    if jobs < 1 or jobs > cores:
        raise ValueError(
            f"--jobs {jobs}: give 1 to {cores} (worker processes, one thread each, on "
            f"this machine's {cores} cores)"
        )
    axes = [parse_axis(text) for text in grid]
    fields = [axis.field for axis in axes]
    twice = sorted({name for name in fields if fields.count(name) > 1})
    if twice:
        raise ValueError(f"--grid {twice[0]} given twice; put all its values in one --grid")
    for override in sets:
        key = override.partition("=")[0].strip()
        if key == "run_dir":
            raise ValueError(f"--set {override}: a sweep names its runs' folders (use -o DIR)")
        if key == "train.seed" and seeds is not None:
            raise ValueError(f"--set {override}: the seeds are given by --seeds")
        if key in fields:
            raise ValueError(f"--set {override}: {key} is also a --grid field")
    first, *_ = [load_config(path, list(sets)) for path in paths]  # each file's errors
    out = Path(out) if out is not None else first.run_dir.with_name(first.run_dir.name + "-sweep")
    seeds = list(seeds) if seeds is not None else [first.train.seed]
    sweep = Sweep(paths, axes, seeds, list(sets), out)
    for path in paths:
        for combination in itertools.product(*(axis.values for axis in axes)):
            values = dict(zip(fields, combination, strict=True))
            for seed in seeds:
                sweep.members.append(_member(sweep, path, values, seed))
    check_folder(sweep)
    return sweep


def check_configs(paths: Sequence[Path]) -> None:
    """Refuse a config given twice, or two configs of one stem (the stem names their
    runs).

    Raises:
        ValueError: one line naming the two files.
    """
    seen: dict[str, Path] = {}
    for path in paths:
        other = seen.get(path.stem)
        if other is not None and other.resolve() == path.resolve():
            raise ValueError(f"{path}: the config is given twice")
        if other is not None:
            raise ValueError(
                f"{other} and {path}: two configs named {path.stem} (a sweep names each "
                "config's runs by the file's name); rename one"
            )
        seen[path.stem] = path


def _member(sweep: Sweep, path: Path, values: dict[str, str], seed: int) -> Member:
    several = len(sweep.config_paths) > 1
    columns = {CONFIG_AXIS: path.stem, **values} if several else dict(values)
    name = member_name(columns, sweep.columns, seed)
    run_dir = sweep.out / name
    grid = [f"{key}={value}" for key, value in values.items()]
    overrides = [*sweep.sets, *grid, f"train.seed={seed}", "train.threads=1", f"run_dir={run_dir}"]
    where = ", ".join([*([path.stem] if several else []), *grid, f"seed {seed}"])
    try:
        config = load_config(path, overrides)
        check_with_files(config, sweep.files_read)
    except ValueError as error:
        message = re.sub(r" \(from --set [^)]*\)$", "", str(error))
        raise ValueError(f"--grid ({where}): {message}") from None
    for key, value in values.items():
        section, _, name_in_section = key.partition(".")
        options = getattr(config, section, None)
        if (
            options is None
            or not hasattr(options, name_in_section)
            or getattr(options, name_in_section) != _coerced(parse_value(value), options, key)
        ):  # a field of another architecture, set to its default, is dropped by the loader
            architecture = config.model.architecture
            which = f"{path}: " if several else ""
            raise ValueError(
                f"--grid {key}: {which}architecture {architecture!r} does not read it "
                f"(selfattn config {architecture} lists the fields it reads)"
            )
    return Member(name, columns, seed, overrides, run_dir, config, path)


def _coerced(value: Any, options: Any, key: str) -> Any:
    """``value`` as the loader stores it in ``options`` (an int given for a float field)."""
    current = getattr(options, key.partition(".")[2])
    if isinstance(current, float) and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if isinstance(current, Path) and isinstance(value, str):
        return Path(value)
    return value


def shared_fields(config: Config, axes: Sequence[GridAxis]) -> dict[str, Any]:
    """The config's fields as ``section.field → value`` (JSON values), without the
    grid's fields, the seed and those of :data:`EXECUTION_FIELDS`."""
    skip = {*EXECUTION_FIELDS, "train.seed", *(axis.field for axis in axes)}
    flat = json.loads(json.dumps(flatten(config_to_dict(config))))
    return {key: value for key, value in flat.items() if key not in skip}


def check_folder(sweep: Sweep) -> None:
    """Refuse an output folder that holds the runs of another config: its ``sweep.json``
    records other shared fields for one of this sweep's configs, or a member's run folder
    another config.

    Raises:
        ValueError: one line naming the folder and the first field that differs.
    """
    record_path = sweep.out / SWEEP_FILE
    if sweep.out.exists() and not sweep.out.is_dir():
        raise ValueError(f"-o {sweep.out}: a file, not a folder")
    if record_path.is_file():
        then = stored_bases(record_path)
        now = sweep.bases()
        if len(now) == 1 and len(then) == 1:  # one config each: compared whatever its name
            then = {stem: fields for stem in now for fields in then.values()}
        several = len(now) > 1
        for stem, fields in now.items():
            if stem in then:
                whose = f"{stem}'s " if several else ""
                what = f"{record_path} was started with {whose}"
                _refuse_difference(sweep.out, fields, then[stem], what)
    for member in sweep.members:
        stored_config = member.run_dir / "config.toml"
        if not stored_config.is_file():
            continue
        try:
            stored = load_config(stored_config)
        except ValueError as error:
            raise ValueError(f"{stored_config}: {error}; choose another -o") from None
        ran = {**shared_fields(stored, []), "train.seed": stored.train.seed}
        runs = {**shared_fields(member.config, []), "train.seed": member.seed}
        _refuse_difference(sweep.out, runs, ran, f"{member.run_dir} holds a run with ")


def stored_bases(record_path: Path) -> dict[str, dict[str, Any]]:
    """The shared fields of each config a ``sweep.json`` records, by the config's stem
    (a record of one config, ``config`` and ``base``, as well as ``configs`` and
    ``bases``).

    Raises:
        ValueError: the file is not a sweep record.
    """
    try:
        stored = json.loads(record_path.read_text(encoding="utf-8"))
        if "bases" in stored:
            bases = stored["bases"]
        else:
            bases = {Path(stored["config"]).stem: stored["base"]}
        if not all(isinstance(fields, dict) for fields in bases.values()):
            raise TypeError
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError, AttributeError):
        raise ValueError(f"{record_path}: not a sweep record; choose another -o") from None
    return {str(stem): fields for stem, fields in bases.items()}


def _refuse_difference(out: Path, now: dict[str, Any], then: dict[str, Any], what: str) -> None:
    # Fields on one side only are a grid's (an earlier sweep of the folder tried other
    # fields): the rest must agree.
    changed = [key for key in now if key in then and now[key] != then[key]]
    if changed:
        key = changed[0]
        more = f" (and {len(changed) - 1} more fields)" if len(changed) > 1 else ""
        raise ValueError(
            f"{out} holds the runs of another config: {what}{key} = "
            f"{format_value(then.get(key))}, this sweep has {format_value(now.get(key))}"
            f"{more}; choose another -o folder"
        )
