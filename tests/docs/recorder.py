"""Writing a record from the command that measures it: ``records.py record ID -- CMD ...``
runs CMD, shows its output as it comes, reads the numbers of the last JSON object it printed
(nested keys joined by dots: ``{"test": {"accuracy": 0.93}}`` gives ``test.accuracy``) and
writes ``docs/records/ID.json`` with the command, the commit, the date and the machine.

A number typed from a terminal can drift from what the command said; a record written by the
command's own run cannot. Nothing is written when the command fails or prints no number.
"""

from __future__ import annotations

import datetime
import json
import math
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import Any


class RecordingError(RuntimeError):
    """The command failed or printed nothing to record; the message is one line."""


def last_json_object(output: str) -> dict[str, Any]:
    """The last line of ``output`` that is a JSON object, or the whole output as one.

    Raises:
        RecordingError: no line (and not the whole output) is a JSON object.
    """
    for line in reversed(output.splitlines()):
        line = line.strip()
        if line.startswith("{") and line.endswith("}"):
            try:
                found = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(found, dict):
                return found
    try:
        whole = json.loads(output)
    except json.JSONDecodeError:
        whole = None
    if isinstance(whole, dict):
        return whole
    raise RecordingError("the command printed no JSON object to record")


def numbers(found: dict[str, Any], prefix: str = "") -> dict[str, float]:
    """The finite numbers of ``found``, nested keys joined by dots (lists are skipped)."""
    flat: dict[str, float] = {}
    for key, value in found.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            flat.update(numbers(value, f"{name}."))
        elif isinstance(value, int | float) and not isinstance(value, bool):
            flat.update({name: value} if math.isfinite(value) else {})
    return flat


def machine(threads: str | None) -> str:
    """The CPU's model and core count, and the thread setting the command ran with."""
    model = "unknown CPU"
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        for line in cpuinfo.read_text(encoding="utf-8").splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    said = f"{os.cpu_count()} cores of {model}"
    return f"{said}, {threads} thread(s)" if threads else said


def commit(root: Path) -> str:
    """The short hash of the checked-out commit (the run's code)."""
    done = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True, text=True
    )
    if done.returncode != 0:
        raise RecordingError(f"not a git checkout: {root} ({done.stderr.strip()})")
    changed = subprocess.run(
        ["git", "status", "--porcelain", "--", "src", "configs"],
        cwd=root,
        capture_output=True,
        text=True,
    ).stdout.strip()
    if changed:
        first = changed.splitlines()[0]
        raise RecordingError(f"commit first: the record names the code it ran ({first} ...)")
    return done.stdout.strip()


def record(
    record_id: str,
    command: list[str],
    *,
    root: Path,
    folder: Path,
    keys: list[str] | None = None,
    note: str | None = None,
    source: Path | None = None,
) -> Path:
    """Run ``command`` from ``root`` and write its numbers as ``folder/record_id.json``:
    those of the last JSON object it printed, or of the JSON file ``source`` (relative to
    ``root``) that the run wrote.

    Raises:
        RecordingError: an empty command, a failed run, no JSON object, a ``source`` the
            run did not write, a key asked for that the output lacks.
    """
    head = commit(root)
    if not command:
        raise RecordingError("no command to run: records.py record ID -- COMMAND ...")
    if not record_id.replace("-", "").replace("_", "").replace(".", "").isalnum():
        raise RecordingError(f"record id {record_id!r}: letters, digits, '-', '_' and '.'")
    started = time.time()
    try:
        process = subprocess.Popen(command, cwd=root, stdout=subprocess.PIPE, text=True)
    except OSError as err:
        raise RecordingError(f"cannot run {command[0]}: {err.strerror}") from None
    assert process.stdout is not None
    lines = []
    for line in process.stdout:
        sys.stdout.write(line)
        lines.append(line)
    if process.wait() != 0:
        raise RecordingError(f"{shlex.join(command)} exited with {process.returncode}")
    if source is None:
        values = numbers(last_json_object("".join(lines)))
    else:
        written = root / source
        if not written.is_file() or written.stat().st_mtime < started:
            raise RecordingError(f"the command did not write {source}")
        values = numbers(last_json_object(written.read_text(encoding="utf-8")))
    if keys:
        missing = [key for key in keys if key not in values]
        if missing:
            raise RecordingError(f"the output has no {', '.join(missing)} (it has {list(values)})")
        values = {key: values[key] for key in keys}
    if not values:
        raise RecordingError("the command's JSON holds no finite number")
    entry: dict[str, Any] = {
        "id": record_id,
        "command": shlex.join(command),
        "commit": head,
        "date": datetime.date.today().isoformat(),
        "machine": machine(os.environ.get("OMP_NUM_THREADS")),
    }
    if note:
        entry["note"] = note
    entry["values"] = values
    path = folder / f"{record_id}.json"
    partial = path.with_suffix(".json.partial")
    partial.write_text(json.dumps(entry, indent=2) + "\n", encoding="utf-8")
    partial.replace(path)
    return path
