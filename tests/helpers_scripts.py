"""The repository's scripts (benchmarks/, docs/), imported by the tests that check them,
and where its shipped configs are (:data:`CONFIGS`)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]
#: The shipped configs (``configs/*.toml``).
CONFIGS = ROOT / "configs"


def load_script(relative: str) -> ModuleType:
    """The script at ``relative`` to the repository root (``benchmarks/kv_cache.py``),
    imported as a module named after its folder and file (``benchmarks_kv_cache``)."""
    path = ROOT / relative
    spec = importlib.util.spec_from_file_location(f"{path.parent.name}_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module
