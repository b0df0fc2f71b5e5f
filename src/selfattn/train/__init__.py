"""Training: configuration, the loop, optimiser and schedule, checkpoints.

>>> config = load_config(Path("configs/pos_wsj.toml"), ["train.epochs=3"])
>>> result = train(config, spec, train_batches, dev_batches, objective=task, vocabs=vocabs)
"""

from __future__ import annotations

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
