"""One road from a config to a prediction for every task type.

>>> result, prepared = run(load_config(Path("configs/pos_wsj.toml")))
>>> predictor = Predictor("runs/pos_wsj")
>>> [example] = predictor.read("I saw a saw")
>>> predictor.predict(example)
'I/PRP saw/VBD a/DT saw/NN'

A registered :class:`Task` per task type (:data:`TASKS`: ``token``, ``sequence``,
``regression``, ``multilabel``, ``seq2seq``, ``bits``) prepares the data, builds the model,
gives the loss and the development metrics, reads a user's input, predicts and extracts
attention maps; :func:`prepare` / :func:`run` and :class:`Predictor` only ask it.
"""

from __future__ import annotations

# Every task type registers itself in TASKS when its module loads. They are imported here,
# once: Python runs this file before any module of the package, so TASKS is full whichever
# one a caller imports, and the road (run, predictor) never imports a task type itself.
import importlib
import pkgutil

from selfattn.tasks.bits import BitsTask
from selfattn.tasks.labelling import LabelTask
from selfattn.tasks.metrics import compute_loss, evaluate, evaluate_regression, regression_loss
from selfattn.tasks.multilabel import MultiLabelTask
from selfattn.tasks.predictor import Predictor
from selfattn.tasks.regression import RegressionTask
from selfattn.tasks.run import declared_task, prepare, run
from selfattn.tasks.seq2seq import Decoded, Seq2SeqTask, bpe_pair, token_error_rate
from selfattn.tasks.sequence import SequenceTask
from selfattn.tasks.task import (
    TASKS,
    AttentionFigure,
    Prepared,
    Task,
    build_for_spec,
    register_task,
    task_named,
)
from selfattn.tasks.token import TokenTask

# A task type in a module not named above (a new one: one more file here) registers now.
for _module in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_module.name}")

__all__ = [
    "TASKS",
    "AttentionFigure",
    "BitsTask",
    "Decoded",
    "LabelTask",
    "MultiLabelTask",
    "Predictor",
    "Prepared",
    "RegressionTask",
    "Seq2SeqTask",
    "SequenceTask",
    "Task",
    "TokenTask",
    "bpe_pair",
    "build_for_spec",
    "compute_loss",
    "declared_task",
    "evaluate",
    "evaluate_regression",
    "prepare",
    "register_task",
    "regression_loss",
    "run",
    "task_named",
    "token_error_rate",
]
