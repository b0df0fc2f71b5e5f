"""A run's configuration: its sections as frozen dataclasses, read from TOML and
overridable field by field (``--set section.field=value``).

>>> config = load_config(Path("configs/pos_wsj.toml"), ["train.epochs=3"])
"""

from __future__ import annotations

from selfattn.config.loading import (
    SECTIONS,
    apply_override,
    config_from_dict,
    config_to_dict,
    config_to_toml,
    load_config,
    parse_value,
    toml_literal,
)
from selfattn.config.sections import (
    Config,
    DataConfig,
    DeviceName,
    Schedule,
    Strategy,
    TrainConfig,
)
from selfattn.models.option_groups import ModelOptions
from selfattn.models.registry import model_options
from selfattn.models.seq2seq_options import Seq2SeqConfig

__all__ = [
    "SECTIONS",
    "Config",
    "DataConfig",
    "DeviceName",
    "ModelOptions",
    "Schedule",
    "Seq2SeqConfig",
    "Strategy",
    "TrainConfig",
    "apply_override",
    "config_from_dict",
    "config_to_dict",
    "config_to_toml",
    "load_config",
    "model_options",
    "parse_value",
    "toml_literal",
]
