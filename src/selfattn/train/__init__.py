"""Training: configuration, the loop, optimiser and schedule, checkpoints.

>>> config = load_config(Path("configs/pos_wsj.toml"), ["train.epochs=3"])
>>> result = train(config, spec, train_batches, dev_batches, objective=task, vocabs=vocabs)

The package itself is callable: ``selfattn.train(config, set={...})`` is
:func:`selfattn.api.train`, the Python face of ``selfattn train`` (see
:class:`_CallablePackage` for why the package, and not a function, answers that name).
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import Any

from selfattn.config import (
    Config,
    DataConfig,
    ModelOptions,
    TrainConfig,
    config_from_dict,
    config_to_dict,
    config_to_toml,
    load_config,
    model_options,
)
from selfattn.train.checkpoint import (
    FORMAT_VERSION,
    Checkpoint,
    load_checkpoint,
    load_model,
    save_checkpoint,
)
from selfattn.train.loop import (
    METRICS_FILE,
    TIMING_KEYS,
    Trainer,
    TrainResult,
    resolve_device,
    seed_everything,
    train,
)
from selfattn.train.objective import Objective
from selfattn.train.optim import WarmupDecay, build_optimizer, build_scheduler
from selfattn.train.rng import get_rng_state, set_rng_state

__all__ = [
    "FORMAT_VERSION",
    "METRICS_FILE",
    "TIMING_KEYS",
    "Checkpoint",
    "Config",
    "DataConfig",
    "ModelOptions",
    "Objective",
    "TrainConfig",
    "TrainResult",
    "Trainer",
    "WarmupDecay",
    "build_optimizer",
    "build_scheduler",
    "config_from_dict",
    "config_to_dict",
    "config_to_toml",
    "get_rng_state",
    "load_checkpoint",
    "load_config",
    "load_model",
    "model_options",
    "resolve_device",
    "save_checkpoint",
    "seed_everything",
    "set_rng_state",
    "train",
]


class _CallablePackage(types.ModuleType):
    """This package, callable: ``selfattn.train(...)`` trains as :func:`selfattn.api.train`.

    ``selfattn.train`` names this package, and Python's import system binds that name on
    ``selfattn`` to the package whenever any ``selfattn.train.*`` module is imported — so
    a function exported under the same name would be replaced by the package depending on
    what was imported first. Making the package itself callable gives the one name one
    meaning in every import order.
    """

    def __call__(self, config: Any, **options: Any) -> Any:
        """:func:`selfattn.api.train` (``config``, ``set={...}``, ``resume`` …)."""
        # Imported by name, on call: the API is the top layer and builds on this package;
        # nothing here depends on it.
        api = importlib.import_module("selfattn.api")
        return api.train(config, **options)


sys.modules[__name__].__class__ = _CallablePackage
