"""Test-only libraries stay out of the library: importing every selfattn module (the CLI
included) loads none of them. transformers, onnx, onnxruntime, onnxscript and playwright
are in the dev extra only; selfattn's own code may import onnx lazily inside an export."""

from __future__ import annotations

import json
import subprocess
import sys

TEST_ONLY = ("transformers", "onnxruntime", "onnx", "onnxscript", "playwright")

PROGRAM = """
import importlib, json, pkgutil, sys
import selfattn
for module in pkgutil.walk_packages(selfattn.__path__, "selfattn."):
    importlib.import_module(module.name)
loaded = sorted({name.split(".")[0] for name in sys.modules})
print(json.dumps(loaded))
"""


def test_importing_every_module_loads_no_test_only_library() -> None:
    result = subprocess.run(
        [sys.executable, "-c", PROGRAM], capture_output=True, text=True, check=True, timeout=300
    )
    loaded = set(json.loads(result.stdout.strip().splitlines()[-1]))
    assert "selfattn" in loaded
    assert not loaded & set(TEST_ONLY), sorted(loaded & set(TEST_ONLY))
