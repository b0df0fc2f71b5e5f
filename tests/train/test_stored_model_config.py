"""A run folder's ``[model]``: a new one stores the fields its architecture reads; one
written while ``[model]`` was one flat section (every field of every architecture) still
loads, its unread fields dropped while unset, and is refused in one line otherwise."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from selfattn.models.architectures import ARCHITECTURES, BiGRUOptions
from selfattn.models.registry import model_options
from selfattn.train import (
    FORMAT_VERSION,
    Config,
    DataConfig,
    build_optimizer,
    build_scheduler,
    config_from_dict,
    config_to_dict,
    load_checkpoint,
    save_checkpoint,
)

from ..helpers_data import edit_json
from ..helpers_models import build

#: The ``[model]`` of a format-1 manifest written while it was one flat section: all 38
#: fields, at the defaults of then, four of them the former ones (ffn_dropout,
#: head_dropout, dropout_masks, linear_layers) of a run from before they changed.
FLAT_MODEL: dict[str, Any] = {
    "architecture": "transformer",
    "embed_dim": 128,
    "num_heads": 4,
    "num_layers": 2,
    "ffn_dim": 256,
    "dropout": 0.1,
    "positional": "sinusoidal",
    "pooling": "mean",
    "window_k": 5,
    "char_features": False,
    "char_dim": 48,
    "word_dropout": 0.0,
    "norm_first": True,
    "attention": "dense",
    "attention_size": None,
    "attention_dropout": None,
    "patch_size": None,
    "grid_positional": None,
    "score": "scaled_dot",
    "normalizer": "softmax",
    "include_self": True,
    "share_weights": False,
    "rnn_cell": "gru",
    "input_feeding": True,
    "pretrained": None,
    "exit_heads": False,
    "exit_loss_weights": "uniform",
    "memory_size": 50,
    "memory_width": 20,
    "memory_tying": "adjacent",
    "linear_start_steps": 0,
    "memory_noise": 0.0,
    "halting": "none",
    "ponder_weight": 0.01,
    "ffn_dropout": None,
    "head_dropout": None,
    "dropout_masks": "bernoulli",
    "linear_layers": "torch",
}
SMALL = {"embed_dim": 16, "num_layers": 1, "ffn_dim": 16}
VOCABS = {"tokens": ["<pad>", "<unk>", "a", "b"], "labels": ["X", "Y"]}


def _save(directory: Path, config: Config) -> None:
    model = build(config.model, "token", vocab_size=4, max_len=16)
    optimizer = build_optimizer(model, config.train)
    scheduler = build_scheduler(optimizer, config.train, total_steps=10)
    state = {"epoch": 1, "step": 3, "best_score": 0.5}
    save_checkpoint(directory, model, optimizer, scheduler, state, config, VOCABS)


def _config(**model: Any) -> Config:
    return Config(DataConfig(dataset="synthetic"), model_options(**model), run_dir=Path("x"))


def test_the_flat_section_had_38_fields_and_each_is_some_architecture_s() -> None:
    read = {name for entry in ARCHITECTURES.values() for name in entry.options.field_names()}
    assert len(FLAT_MODEL) == 38 and set(FLAT_MODEL) == read


@pytest.mark.parametrize("architecture", sorted(ARCHITECTURES))
def test_a_new_run_folder_stores_what_the_architecture_reads_and_reads_it_back(
    architecture: str,
) -> None:
    config = _config(architecture=architecture)
    stored = json.loads(json.dumps(config_to_dict(config)))  # as the manifest holds it
    assert tuple(stored["model"]) == ARCHITECTURES[architecture].options.field_names()
    assert config_from_dict(stored) == config


@pytest.mark.parametrize("architecture", sorted(ARCHITECTURES))
def test_an_old_flat_model_section_loads_as_its_architecture_s_options(architecture: str) -> None:
    options = ARCHITECTURES[architecture].options
    stored = {**FLAT_MODEL, "architecture": architecture}
    config = config_from_dict({"data": {"dataset": "synthetic"}, "model": stored})
    reads = options.field_names()
    assert config.model == options(**{name: stored[name] for name in reads})


def test_an_old_run_folder_loads(tmp_path: Path) -> None:
    former = {"head_dropout": None, "dropout_masks": "bernoulli", "linear_layers": "torch"}
    config = _config(architecture="bigru", **former, **SMALL)
    _save(tmp_path / "ckpt", config)
    # As the flat section stored it; positional "none" is what a baseline of then had.
    flat = {**FLAT_MODEL, **SMALL, "architecture": "bigru", "positional": None}
    edit_json(tmp_path / "ckpt" / "manifest.json", config={**config_to_dict(config), "model": flat})
    loaded = load_checkpoint(tmp_path / "ckpt").config
    assert loaded == config
    assert loaded.model == BiGRUOptions(**SMALL, **former)


@pytest.mark.parametrize(
    ("field", "value"), [("num_heads", 8), ("memory_noise", 0.1), ("ffn_dropout", 0.2)]
)
def test_an_old_run_folder_with_an_unread_field_set_is_refused_in_one_line(
    tmp_path: Path, field: str, value: Any
) -> None:
    config = _config(architecture="bigru", **SMALL)
    _save(tmp_path / "ckpt", config)
    flat = {**FLAT_MODEL, **SMALL, "architecture": "bigru", field: value}
    edit_json(tmp_path / "ckpt" / "manifest.json", config={**config_to_dict(config), "model": flat})
    with pytest.raises(ValueError) as error:
        load_checkpoint(tmp_path / "ckpt")
    message = str(error.value)
    assert f"checkpoint format {FORMAT_VERSION} " in message
    assert f"model.{field} = {value}: architecture 'bigru' does not use it" in message
    assert "manifest.json" in message and "remove it" in message
    assert "\n" not in message
