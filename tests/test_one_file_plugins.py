"""A new architecture, or a new task type, is one more file in its package: importing the
package imports every module in it, so the file registers itself without a line elsewhere.
Checked in a fresh interpreter whose packages also look in a temporary folder.

The new task type is then the whole road without another edit (nothing in ``config/``,
no ``data_task`` of its own): a config chooses it (``data.task = "extra_task"``), it
trains a step on a user's file, its run stores it beside the label layout it shares
with ``sequence``, and ``selfattn predict`` reads the run back as it and predicts
through it."""

from __future__ import annotations

import os
import re
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

    def predict(self, model, example, **options):
        return "extra: " + super().predict(model, example, **options)
"""

CONFIG = """
run_dir = "{run}"
[data]
dataset = "{data}"
task = "extra_task"
dev_fraction = 0.25
[model]
embed_dim = 8
num_heads = 1
num_layers = 1
ffn_dim = 8
[train]
epochs = 1
max_steps = 1
device = "cpu"
threads = 1
tensorboard = false
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
if len(sys.argv) > 3:  # train on the config sys.argv[3], save, predict with the run
    import json
    from pathlib import Path
    from selfattn.cli.main import main
    assert main(["train", sys.argv[3], "--no-progress"]) == 0
    run = Path(sys.argv[4])
    manifest = json.loads((run / "best" / "manifest.json").read_text())
    print(manifest["spec"]["task_type"], manifest["spec"]["task"], manifest["vocabs"]["task"])
    import selfattn
    loaded = selfattn.load(run)
    print("api", loaded.task, loaded.layout)
    assert main(["predict", str(run), "a warm film", "--threads", "1"]) == 0
"""


def test_a_module_in_the_package_registers_without_an_import_line(tmp_path: Path) -> None:
    architectures, tasks = tmp_path / "architectures", tmp_path / "tasks"
    architectures.mkdir()
    tasks.mkdir()
    (architectures / "extra_fc.py").write_text(textwrap.dedent(ARCHITECTURE))
    (tasks / "extra_task.py").write_text(textwrap.dedent(TASK_TYPE))
    rows = [f"{('neg', 'pos')[i % 2]},a {('dull', 'warm')[i % 2]} film" for i in range(8)]
    data = tmp_path / "train.csv"
    data.write_text("label,text\n" + "\n".join(rows) + "\n", encoding="utf-8")
    run = tmp_path / "run"
    config = tmp_path / "extra.toml"
    config.write_text(CONFIG.format(run=run.as_posix(), data=data.as_posix()), encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-c", LOADER, str(architectures), str(tasks), str(config), str(run)],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].split() == ["True", "True", "True"]
    # The run stores its task type beside the label layout it reads and builds as.
    assert "extra_task sequence extra_task" in lines
    assert "api extra_task sequence" in lines  # selfattn.load names the task type too
    # Read back as the task type that trained it: its own predict wrote the line.
    assert re.fullmatch(
        r"extra: (neg|pos)\t\((neg|pos) \d\.\d{3}, (neg|pos) \d\.\d{3}\)", lines[-1]
    )
