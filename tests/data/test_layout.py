"""The data package's layout: the registry loads no recipe, and no module needs another
to be imported first (no import circle)."""

from __future__ import annotations

import os
import pkgutil
import subprocess
import sys

import selfattn.data
from selfattn.data import RECIPES
from selfattn.data.registry import Recipe


def run_fresh(code: str, *args: str) -> subprocess.CompletedProcess[str]:
    """``code`` in a new interpreter (one thread, as the tests run)."""
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
        check=False,
    )


def test_importing_the_registry_loads_no_recipe() -> None:
    code = (
        "import sys\n"
        "from selfattn.data.registry import RECIPES\n"
        "loaded = sorted(m for m in sys.modules if m.startswith('selfattn.data.recipes'))\n"
        "print(loaded, len(RECIPES))\n"
    )
    result = run_fresh(code)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["[]", "0"]


def test_importing_the_recipes_package_fills_the_registry() -> None:
    code = (
        "from selfattn.data.recipes import RECIPES\n"
        "from selfattn.data import registry\n"
        "print(RECIPES is registry.RECIPES, len(RECIPES))\n"
    )
    result = run_fresh(code)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["True", str(len(RECIPES))]
    assert all(isinstance(recipe, Recipe) for recipe in RECIPES.values())


# Each module is imported after every selfattn module has been dropped from sys.modules:
# as in a fresh interpreter, so an import circle would fail, but with torch loaded once.
_IMPORT_EACH = """
import importlib, sys, traceback
failed = []
for name in sys.argv[1:]:
    for loaded in [m for m in sys.modules if m == "selfattn" or m.startswith("selfattn.")]:
        del sys.modules[loaded]
    try:
        importlib.import_module(name)
    except Exception:
        failed.append(name + ": " + traceback.format_exc(limit=-3))
print("\\n".join(failed))
sys.exit(1 if failed else 0)
"""


def test_every_data_module_imports_on_its_own() -> None:
    modules = [
        info.name for info in pkgutil.walk_packages(selfattn.data.__path__, prefix="selfattn.data.")
    ]
    assert {"selfattn.data.registry", "selfattn.data.recipes.lra"} <= set(modules)
    result = run_fresh(_IMPORT_EACH, "selfattn.data", *modules)
    assert result.returncode == 0, result.stdout + result.stderr
