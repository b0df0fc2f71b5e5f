"""The records behind the documented numbers, the citations that point at them, and the
command that measures a model's parameter count.

A record is one JSON file in ``docs/records/``, named ``ID.json``: what one command printed,
with where and when it ran::

    {"id": "toy", "command": "selfattn toy --threads 1", "commit": "0f973b4",
     "date": "2026-11-24", "machine": "2 CPU cores, otherwise idle",
     "values": {"majority": 0.546, "self-attention": 0.955}}

A record whose values are parameter counts also says, under ``models``, which model each
count is of: a config, its ``--set`` overrides and the :class:`TaskSpec` its data gave
(vocabulary and label counts), so the count is recomputed by building the model, with no
data (``"models": {"transformer": {"config": "configs/x.toml", "set": [], "spec": {...}}}``;
``"module": "encoder"`` counts that part of the model alone).

A page cites a value by an HTML comment right after the number, which neither GitHub nor the
site shows: ``0.955 <!-- record: toy self-attention -->``, or ``9.45 M <!-- record:
bible-en-es-params transformer -->``. The number as written must be the value rounded to
the digits written (``M`` and ``k`` scale it); a unit of up to three letters (``s``, ``%``)
may stand between the number and the comment.

Output quoted in a fenced block cites a record by the comment alone on the line before the
fence, ``<!-- record: ID -->``: each of the record's values must then be one of the block's
numbers (rounded as written).

Run as a script, ``params CONFIG [--set FIELD=VALUE ...] [--module NAME]`` loads the
config's data, builds its model and prints the record entry (spec and count) to paste under
``models`` and ``values``; ``splits CONFIG [--set ...]`` prints the sizes of its data's
splits as one JSON line (examples, positions, the majority label's share); ``count`` says
how many documented numbers cite a record (``--pages``: the unbacked ones by page;
``--sections PAGE``: one page's by section, the most first);
``record ID -- COMMAND ...`` runs a command and writes the record of what it printed
(tests/docs/recorder.py).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
RECORDS = ROOT / "docs" / "records"
FIELDS = {"id": str, "command": str, "commit": str, "date": str, "machine": str, "values": dict}
DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
COMMIT = re.compile(r"[0-9a-f]{7,40}")
CITATION = re.compile(
    r"(?P<number>-?\d[\d,]*(?:\.\d+)?)(?P<unit>\s?[A-Za-z%]{1,3})?\s*"
    r"<!-- record: (?P<id>[\w.-]+) (?P<key>[\w.-]+) -->"
)
BLOCK_CITATION = re.compile(
    r"^<!-- record: (?P<id>[\w.-]+) -->\n(?P<block>```[^\n]*\n.*?^```)", re.MULTILINE | re.DOTALL
)
NUMBER = re.compile(r"(?<![\w.])-?\d[\d,]*(?:\.\d+)?(?![\d])")
SCALES = {"k": 1e3, "M": 1e6}
FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)
INLINE_CODE = re.compile(r"`[^`\n]*`")
# What counts as a documented number: a decimal (0.9337, 9.45) or a thousands-grouped
# integer (65,761) in prose, not in code, not part of a date or a version.
MEASURED = re.compile(r"(?<![\w.\-])(?:\d+\.\d+|\d{1,3}(?:,\d{3})+)(?![\w.]*\d)(?!-\d)")


class RecordError(ValueError):
    """A record file that breaks the format; the message names the file and field."""


@dataclass(frozen=True)
class Record:
    """One record file: the command that measured the values and where it ran."""

    id: str
    command: str
    commit: str
    date: str
    machine: str
    values: dict[str, float]
    models: dict[str, dict[str, Any]]
    path: Path


@dataclass(frozen=True)
class Citation:
    """A number in a document followed by a record marker, and where (``README.md:56``)."""

    where: str
    number: str
    unit: str
    record: str
    key: str

    def matches(self, value: float) -> bool:
        """Whether the number as written is ``value`` rounded to the digits written."""
        written = float(self.number.replace(",", ""))
        decimals = len(self.number.split(".")[1]) if "." in self.number else 0
        scale = SCALES.get(self.unit.strip(), 1.0)
        return round(value / scale, decimals) == round(written, decimals)


def read_record(path: Path) -> Record:
    """The record in ``path``.

    Raises:
        RecordError: not JSON, a field missing or of the wrong type, an id that is not the
            file's name, a malformed date or commit, a value that is not a number, a model
            for a value the record lacks.
    """
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise RecordError(f"{path}:{err.lineno}: not JSON ({err.msg})") from None
    if not isinstance(data, dict):
        raise RecordError(f"{path}: a record is a JSON object")
    for name, kind in FIELDS.items():
        if not isinstance(data.get(name), kind) or not data[name]:
            raise RecordError(f"{path}: field {name!r} must be a non-empty {kind.__name__}")
    if data["id"] != path.stem:
        raise RecordError(f"{path}: field 'id' is {data['id']!r}, the file says {path.stem!r}")
    if not DATE.fullmatch(data["date"]):
        raise RecordError(f"{path}: field 'date' is {data['date']!r}, not YYYY-MM-DD")
    if not COMMIT.fullmatch(data["commit"]):
        raise RecordError(f"{path}: field 'commit' is {data['commit']!r}, not a commit hash")
    for key, value in data["values"].items():
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise RecordError(f"{path}: values.{key} is {value!r}, not a number")
    models = data.get("models", {})
    for key, model in models.items():
        if key not in data["values"]:
            raise RecordError(f"{path}: models.{key} counts a value the record lacks")
        if not isinstance(model, dict) or not isinstance(model.get("config"), str):
            raise RecordError(f"{path}: models.{key} needs a 'config' path")
    return Record(
        id=data["id"],
        command=data["command"],
        commit=data["commit"],
        date=data["date"],
        machine=data["machine"],
        values={key: float(value) for key, value in data["values"].items()},
        models=models,
        path=path,
    )


def load_records(folder: Path = RECORDS) -> dict[str, Record]:
    """Every record in ``folder`` by id."""
    return {path.stem: read_record(path) for path in sorted(folder.glob("*.json"))}


def documents() -> list[Path]:
    """The Markdown the records back: README.md, docs/ and benchmarks/README.md."""
    return [
        ROOT / "README.md",
        *sorted((ROOT / "docs").rglob("*.md")),
        ROOT / "benchmarks/README.md",
    ]


def prose(text: str) -> str:
    """``text`` with code fences and inline code blanked, line breaks kept."""

    def blank(match: re.Match[str]) -> str:
        return re.sub(r"[^\n]", " ", match.group(0))

    return INLINE_CODE.sub(blank, FENCE.sub(blank, text))


def citations(path: Path) -> list[Citation]:
    """The record markers of ``path`` with the numbers they follow."""
    text = prose(path.read_text(encoding="utf-8"))
    return [
        Citation(
            where=f"{_shown(path)}:{text.count(chr(10), 0, match.start()) + 1}",
            number=match.group("number"),
            unit=match.group("unit") or "",
            record=match.group("id"),
            key=match.group("key"),
        )
        for match in CITATION.finditer(text)
    ]


@dataclass(frozen=True)
class BlockCitation:
    """A fenced block of quoted output that a record backs, and where it starts."""

    where: str
    record: str
    numbers: list[str]

    def missing(self, values: dict[str, float]) -> list[str]:
        """The keys of ``values`` that no number of the block is (rounded as written)."""
        return [
            key
            for key, value in values.items()
            if not any(
                Citation(self.where, n, "", self.record, key).matches(value) for n in self.numbers
            )
        ]


def block_citations(path: Path) -> list[BlockCitation]:
    """The fenced blocks of ``path`` that cite a record on the line before them."""
    text = path.read_text(encoding="utf-8")
    return [
        BlockCitation(
            where=f"{_shown(path)}:{text.count(chr(10), 0, match.start()) + 1}",
            record=match.group("id"),
            numbers=NUMBER.findall(match.group("block")),
        )
        for match in BLOCK_CITATION.finditer(text)
    ]


def _shown(path: Path) -> Path:
    return path.relative_to(ROOT) if path.is_relative_to(ROOT) else path


def count_numbers(paths: list[Path]) -> tuple[int, int, int]:
    """(prose numbers cited by a record, documented numbers in prose, numbers of quoted
    output that a record backs) over ``paths``."""
    cited = total = quoted = 0
    records = load_records()
    for path in paths:
        text = prose(path.read_text(encoding="utf-8"))
        total += len(MEASURED.findall(text))
        cited += sum(1 for c in citations(path) if MEASURED.fullmatch(c.number))
        quoted += sum(
            len(records[b.record].values) for b in block_citations(path) if b.record in records
        )
    return cited, total, quoted


def unbacked(paths: list[Path]) -> dict[str, int]:
    """Each page's documented numbers in prose that cite no record, by its path."""
    found = {}
    for path in paths:
        text = prose(path.read_text(encoding="utf-8"))
        cited = sum(1 for c in citations(path) if MEASURED.fullmatch(c.number))
        found[str(_shown(path))] = len(MEASURED.findall(text)) - cited
    return found


HEADING = re.compile(r"^#{1,6} .*$", re.MULTILINE)


def unbacked_sections(path: Path) -> list[tuple[str, int]]:
    """The unbacked numbers of ``path`` by section: each heading (``results.md:127 ###
    German``, or the page's name for the text before the first) with its count, in page
    order. Headings inside code fences are not headings."""
    raw = path.read_text(encoding="utf-8")
    text = prose(raw)
    starts = sorted({0, *(match.start() for match in HEADING.finditer(text))})
    found = []
    for start, end in zip(starts, [*starts[1:], len(text)], strict=True):
        part = text[start:end]
        cited = sum(1 for c in CITATION.finditer(part) if MEASURED.fullmatch(c.group("number")))
        line = text.count("\n", 0, start) + 1
        title = raw.splitlines()[line - 1] if HEADING.match(text, start) else "(no heading)"
        found.append((f"{_shown(path)}:{line} {title}", len(MEASURED.findall(part)) - cited))
    return found


def parameter_count(model: dict[str, Any]) -> int:
    """The parameters of the model a record's ``models`` entry describes, built from its
    config and stored spec alone (no data is read)."""
    from selfattn.config import load_config
    from selfattn.models.spec import TaskSpec
    from selfattn.tasks.task import build_for_spec

    config = load_config(ROOT / model["config"], list(model.get("set", [])))
    built = build_for_spec(config, TaskSpec.from_dict(dict(model["spec"])))
    if "module" in model:
        built = built.get_submodule(model["module"])
    return sum(p.numel() for p in built.parameters())


def measure(config_path: str, overrides: list[str], module: str | None = None) -> dict[str, Any]:
    """The ``models`` entry and count for ``config_path`` (of its ``module`` alone, if
    given): its data loaded and its model built, as training would."""
    from selfattn.config import load_config
    from selfattn.tasks.run import prepare

    prepared = prepare(load_config(Path(config_path), overrides))
    model: dict[str, Any] = {"config": config_path, "set": overrides}
    if module is not None:
        model["module"] = module
    model["spec"] = prepared.spec.to_dict()
    return {"model": model, "parameters": parameter_count(model)}


def split_sizes(config_path: str, overrides: list[str]) -> dict[str, Any]:
    """The sizes of ``config_path``'s data as training loads it (fitted to ``data.max_len``,
    ``data.train_fraction`` applied): per split its examples, their input positions (words,
    frames) and, where an example has one label or one per position, the share of the most
    frequent label (the majority baseline); and the vocabulary and label counts of its spec.
    """
    from collections import Counter

    from selfattn.config import load_config
    from selfattn.tasks.run import prepare

    prepared = prepare(load_config(Path(config_path), overrides))
    sizes: dict[str, Any] = {}
    for name in ("train", "dev", "test"):
        examples = getattr(prepared.splits, name)
        split: dict[str, float] = {
            "examples": len(examples),
            "positions": sum(len(example) for example in examples),
        }
        task = prepared.splits.task
        if examples and task in ("token", "sequence"):
            labels = Counter(
                label
                for example in examples
                for label in (example.label if task == "token" else (example.label,))
            )
            split["majority"] = max(labels.values()) / sum(labels.values())
        sizes[name] = split
    spec = prepared.spec.to_dict()
    # The sizes of the spec, not its flags (a bool is an int too).
    sizes["spec"] = {key: value for key, value in spec.items() if type(value) is int}
    return sizes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    params = commands.add_parser("params", help="a config's parameter count and spec, as JSON")
    params.add_argument("config", help="a config path relative to the repository root")
    params.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE")
    params.add_argument("--module", help="count this submodule alone (encoder)")
    sizes = commands.add_parser("splits", help="a config's data: split sizes, as JSON")
    sizes.add_argument("config", help="a config path relative to the repository root")
    sizes.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE")
    counts = commands.add_parser("count", help="how many documented numbers records back")
    counts.add_argument("--pages", action="store_true", help="the unbacked numbers, by page")
    counts.add_argument(
        "--sections",
        metavar="PAGE",
        type=Path,
        help="the unbacked numbers of one page by section, the most first",
    )
    counts.set_defaults(config=None)
    recording = commands.add_parser("record", help="run a command and record what it prints")
    recording.add_argument("id", help="the record's name: docs/records/ID.json")
    recording.add_argument("--keys", help="record only these values (comma-separated)")
    recording.add_argument("--note", help="what the values are")
    recording.add_argument(
        "--from", dest="source", type=Path, help="read the JSON file the command writes"
    )
    argv = list(sys.argv[1:] if argv is None else argv)
    cut = argv.index("--") if "--" in argv else len(argv)
    args = parser.parse_args(argv[:cut])
    args.run = argv[cut + 1 :]
    if args.command == "record":
        return _record(args)
    if args.command == "count" and args.sections:
        page = args.sections if args.sections.is_absolute() else ROOT / args.sections
        if not page.is_file():
            print(f"records.py count: --sections {args.sections}: no such page", file=sys.stderr)
            return 2
        ranked = sorted(unbacked_sections(page), key=lambda found: -found[1])
        for where, count in ranked:
            if count:
                print(f"{count:5d}  {where}")
        return 0
    if args.command == "count" and args.pages:
        print(json.dumps(unbacked(documents()), indent=1))
        return 0
    if args.command == "count":
        cited, total, quoted = count_numbers(documents())
        print(f"{cited} of {total} documented numbers are backed by a record", end="")
        print(f", and {quoted} numbers of quoted output")
        return 0
    if args.command == "splits":
        print(json.dumps(split_sizes(args.config, args.set)))
        return 0
    print(json.dumps(measure(args.config, args.set, args.module), indent=2))
    return 0


def _record(args: argparse.Namespace) -> int:
    if __package__:
        from .recorder import RecordingError, record
    else:  # run as a script: the folder is on the path
        from recorder import RecordingError, record  # type: ignore[no-redef]

    keys = args.keys.split(",") if args.keys else None
    try:
        path = record(
            args.id,
            args.run,
            root=ROOT,
            folder=RECORDS,
            keys=keys,
            note=args.note,
            source=args.source,
        )
    except RecordingError as err:
        print(f"records.py record: {err}", file=sys.stderr)
        return 2
    print(f"wrote {_shown(path)}: cite its values as <!-- record: {args.id} KEY -->")
    return 0


if __name__ == "__main__":
    sys.exit(main())
