"""A new architecture, or a new task type, is one more file in its package: importing the
package imports every module in it, so the file registers itself without a line elsewhere.
Checked in a fresh interpreter whose packages also look in a temporary folder."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

ARCHITECTURE = """
from dataclasses import dataclass

from selfattn.models.architectures.fc import FCEncoder
from selfattn.models.option_groups import EncoderOptions
from selfattn.models.registry import register_architecture


@register_architecture("extra_fc", summary="", produces={"vectors"}, encoder=FCEncoder)
@dataclass(frozen=True)
class ExtraOptions(EncoderOptions):
    architecture: str = "extra_fc"
"""

TASK_TYPE = """
from selfattn.tasks.sequence import SequenceTask
from selfattn.tasks.task import register_task


@register_task
class ExtraTask(SequenceTask):
    name = "extra_task"
"""

#: Imports a package with ``folder`` on its search path (as if its files were in it).
LOADER = """
import importlib.util, sys
for name, folder in [
    ("selfattn.models.architectures", sys.argv[1]),
    ("selfattn.tasks", sys.argv[2]),
]:
    spec = importlib.util.find_spec(name)
    spec.submodule_search_locations.append(folder)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
from selfattn.models.architectures import ARCHITECTURES, ENCODERS
from selfattn.tasks import TASKS
print("extra_fc" in ARCHITECTURES, "extra_fc" in ENCODERS, "extra_task" in TASKS)
"""


def test_a_module_in_the_package_registers_without_an_import_line(tmp_path: Path) -> None:
    architectures, tasks = tmp_path / "architectures", tmp_path / "tasks"
    architectures.mkdir()
    tasks.mkdir()
    (architectures / "extra_fc.py").write_text(textwrap.dedent(ARCHITECTURE))
    (tasks / "extra_task.py").write_text(textwrap.dedent(TASK_TYPE))
    done = subprocess.run(
        [sys.executable, "-c", LOADER, str(architectures), str(tasks)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", "True", "True"]
