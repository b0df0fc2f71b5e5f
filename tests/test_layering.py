"""The package's layering holds: the import contracts of pyproject.toml ([tool.importlinter])
are kept, so a broken layering fails the suite without ``make lint``; and the arrows they
still let through (their ``ignore_imports``, each under a ``# to be removed:`` comment) do
not grow in number."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from importlinter.api import read_configuration

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = ROOT / "pyproject.toml"

#: The most arrows each contract may ignore. An arrow that breaks the layering is fixed in
#: its importer, not added here; lower a number when its leftovers are removed.
MOST_IGNORED = {"layers": 0, "data": 0, "engine": 0, "road": 0, "acyclic": 0}

#: ``lint-imports`` in this interpreter, whichever bin folder holds its script.
LINT = "import sys; from importlinter.cli import lint_imports_command as c; sys.exit(c())"


def ignored_imports() -> dict[str, list[str]]:
    """Each contract's ``ignore_imports``, by contract id."""
    contracts = read_configuration(str(PYPROJECT))["contracts_options"]
    return {contract["id"]: list(contract.get("ignore_imports", [])) for contract in contracts}


def test_the_layering_contracts_are_kept() -> None:
    result = subprocess.run(
        [sys.executable, "-c", LINT, "--no-cache", "--no-logo"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "NO_COLOR": "1"},
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


def test_every_contract_is_there_and_no_ignore_list_grows() -> None:
    ignored = ignored_imports()
    assert set(ignored) == set(MOST_IGNORED)
    grown = {
        contract: f"{len(imports)} ignored imports, at most {MOST_IGNORED[contract]}"
        for contract, imports in ignored.items()
        if len(imports) > MOST_IGNORED[contract]
    }
    assert not grown, grown


def test_every_ignored_import_says_why_it_is_to_be_removed() -> None:
    lines = PYPROJECT.read_text(encoding="utf-8").splitlines()
    entries = {entry for imports in ignored_imports().values() for entry in imports}
    unexplained = []
    for number, line in enumerate(lines):
        if line.strip().strip('",') not in entries:
            continue
        # The comment above it, past the entries it also covers, must start by saying why.
        above = number - 1
        while lines[above].lstrip().startswith('"'):
            above -= 1
        while lines[above].lstrip().startswith("#") and lines[above - 1].lstrip().startswith("#"):
            above -= 1
        if not lines[above].lstrip().startswith("# to be removed:"):
            unexplained.append(f"pyproject.toml:{number + 1}: {line.strip()}")
    assert not unexplained, unexplained
