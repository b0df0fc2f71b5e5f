"""A text model's inputs from a command-line argument: the text itself, or ``@FILE``."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from selfattn.messages import not_a_file


def text_inputs(argument: str, command: str, note: Callable[[str], None]) -> list[tuple[str, str]]:
    """``(source, line)`` pairs from the argument: the text itself, or the lines of @FILE.

    ``@PATH`` names a file when PATH is an existing file; otherwise the whole argument is
    the text (``note`` receives a line saying so). ``@@…`` is always the text ``@…``.

    Raises:
        ValueError: @FILE holds no line that is not blank, or is not UTF-8 (naming the
            line and the byte offset).
        FileNotFoundError: @FILE is a folder or not a regular file (a device, a pipe).
    """
    if argument.startswith("@@"):
        return [("<argument>", argument[1:])]
    if not argument.startswith("@"):
        return [("<argument>", argument)]
    path = Path(argument[1:])
    if path.is_dir():
        raise FileNotFoundError(f"{path}: a folder, not a file of inputs")
    if path.exists() and not path.is_file():
        raise FileNotFoundError(f"{path}: {not_a_file(path)}")
    if not path.is_file():
        note(
            f"selfattn {command}: note: no file {str(path)!r}, so {argument!r} is read as "
            "text (write @@ for a text that starts with @)"
        )
        return [("<argument>", argument)]
    data = path.read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data.count(b"\n", 0, error.start) + 1
        raise ValueError(
            f"{path}:{line}: not UTF-8 text ({error.reason} at byte {error.start})"
        ) from None
    lines = text.splitlines()
    found = [(f"{path}:{number}", line) for number, line in enumerate(lines, 1) if line.strip()]
    if not found:
        raise ValueError(f"{path}: no input lines")
    return found
