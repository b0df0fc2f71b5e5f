"""Every code block of README.md and the site's pages (docs/, subfolders too) runs, so a
snippet cannot rot.

Python blocks run as written, each in a fresh interpreter. Shell blocks run whole in
``bash -e`` from a scratch folder that sees the repository's ``configs/``, with two
stand-ins on PATH: ``selfattn`` is this checkout's CLI with ``train`` cut to one epoch on
one thread (the block's own settings stay; the epoch count is what makes a tour take
minutes), and ``make`` dry-runs its target in the repository (``make -n``), since
``make test`` is the very run this test belongs to and ``make demo`` is the demo test's
job (tests/cli/test_cli_train.py). Datasets a block fetches are fetched first through the
shared ``fetched`` fixture, so a machine that cannot reach them skips with the reason.
Blocks without a language (layouts, sample output) are text, not code.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from selfattn.data.recipes import Recipe
from selfattn.pretrained.weights import PRETRAINED

from .helpers_pretrained import fetched_weights

ROOT = Path(__file__).resolve().parents[1]
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
FENCE = re.compile(r"^```([A-Za-z]*)[^\n]*\n(.*?)^```", re.MULTILINE | re.DOTALL)
SHELL = {"bash", "sh", "shell", "console"}
TIMEOUT_S = 600

SELFATTN_STANDIN = """#!/bin/sh
if [ "$1" = train ]; then
  exec "{python}" -m selfattn.cli.main "$@" --set train.epochs=1 --set train.threads=1
fi
exec "{python}" -m selfattn.cli.main "$@"
"""
MAKE_STANDIN = """#!/bin/sh
exec "{make}" -n -C "{root}" "$@"
"""


@dataclass(frozen=True)
class Block:
    """One fenced code block: where it is, its language and its text."""

    path: Path
    line: int
    language: str
    code: str

    def __str__(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def code_blocks() -> list[Block]:
    """Every python and shell block of the documents, in order."""
    found = []
    for path in DOCUMENTS:
        text = path.read_text(encoding="utf-8")
        for match in FENCE.finditer(text):
            language = match.group(1).lower()
            if language == "python" or language in SHELL:
                line = text.count("\n", 0, match.start()) + 1
                found.append(Block(path, line, language, match.group(2)))
    return found


BLOCKS = code_blocks()


def test_the_documents_have_code_to_run() -> None:
    languages = {block.language for block in BLOCKS}
    assert "python" in languages and languages & SHELL
    assert len(BLOCKS) >= 8


def test_the_readme_stays_a_front_page() -> None:
    # What it is, the two commands, a short tour, where to go next: the rest lives in docs/.
    lines = (ROOT / "README.md").read_text(encoding="utf-8").count("\n")
    assert lines <= 250, f"README.md has {lines} lines: move detail into a docs/ page"


def test_no_document_points_outside_the_repository() -> None:
    for path in DOCUMENTS:
        text = path.read_text(encoding="utf-8")
        assert "../shared" not in text, path
        for target in re.findall(r"\]\(([^)#]+)\)", text):
            if "://" not in target:
                resolved = (path.parent / target).resolve()
                assert resolved.is_relative_to(ROOT), f"{path}: {target} leaves the repository"
                assert resolved.exists(), f"{path}: link {target} points at nothing"


def _environment(tmp_path: Path) -> dict[str, str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, template in (("selfattn", SELFATTN_STANDIN), ("make", MAKE_STANDIN)):
        script = bin_dir / name
        make = shutil.which("make") or "make"
        script.write_text(template.format(python=sys.executable, root=ROOT, make=make))
        script.chmod(0o755)
    env = dict(os.environ)
    env.update(
        PATH=f"{bin_dir}{os.pathsep}{env.get('PATH', '')}",
        OMP_NUM_THREADS="1",
        MPLBACKEND="Agg",
        PYTHONPATH=str(ROOT / "src"),
    )
    return env


@pytest.mark.slow
@pytest.mark.parametrize("block", BLOCKS, ids=str)
def test_code_block_runs(block: Block, tmp_path: Path, fetched: Callable[[str], Recipe]) -> None:
    for name in re.findall(r"selfattn data fetch ([\w-]+)", block.code):
        if name not in PRETRAINED:
            fetched(name)
            continue
        fetched_weights(name)  # weights, not a dataset: skipped where they cannot be fetched
    work = tmp_path / "work"
    work.mkdir()
    (work / "configs").symlink_to(ROOT / "configs")
    env = _environment(tmp_path)
    if block.language == "python":
        command = [sys.executable, "-c", block.code]
    else:
        command = ["bash", "-e", "-o", "pipefail", "-c", block.code]
    result = subprocess.run(
        command, cwd=work, env=env, capture_output=True, text=True, timeout=TIMEOUT_S
    )
    assert result.returncode == 0, (
        f"{block} exited {result.returncode}\n--- stdout\n{result.stdout[-3000:]}"
        f"\n--- stderr\n{result.stderr[-3000:]}"
    )
    assert "Traceback" not in result.stderr, f"{block}\n{result.stderr[-3000:]}"
