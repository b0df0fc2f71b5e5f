"""Run configuration: TOML loading, overrides, round trips, and errors that name the field."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from selfattn.train import (
    Config,
    DataConfig,
    TrainConfig,
    config_from_dict,
    config_to_dict,
    config_to_toml,
    load_config,
    model_options,
)

from ..helpers_scripts import CONFIGS

EXAMPLE = """
run_dir = "runs/example"

[data]
dataset = "pos-wsj"
batch_size = 16

[model]
architecture = "bigru"
embed_dim = 64
positional = "none"
char_features = true

[train]
epochs = 3
lr = 1
schedule = "cosine"
patience = 2
"""


def _write(tmp_path: Path, text: str = EXAMPLE, name: str = "example.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_load_reads_values_and_keeps_defaults(tmp_path: Path) -> None:
    config = load_config(_write(tmp_path))
    assert config.data == DataConfig(dataset="pos-wsj", batch_size=16)
    assert config.model == model_options(
        architecture="bigru", embed_dim=64, positional=None, char_features=True
    )
    assert config.train == TrainConfig(epochs=3, lr=1.0, schedule="cosine", patience=2)
    assert isinstance(config.train.lr, float)
    assert config.run_dir == Path("runs/example")


def test_run_dir_defaults_to_the_file_name(tmp_path: Path) -> None:
    config = load_config(_write(tmp_path, '[data]\ndataset = "x"\n', name="mine.toml"))
    assert config.run_dir == Path("runs/mine")


def test_toml_and_json_round_trips(tmp_path: Path) -> None:
    config = load_config(_write(tmp_path), ["data.bpe_vocab_size=500", "train.grad_clip=none"])
    again = load_config(_write(tmp_path, config_to_toml(config), name="again.toml"))
    assert again == config
    assert config_from_dict(json.loads(json.dumps(config_to_dict(config)))) == config


def test_overrides(tmp_path: Path) -> None:
    config = load_config(
        _write(tmp_path),
        [
            "model.architecture=transformer",  # the file's bigru reads no positions
            "model.embed_dim=32",
            "model.positional=rotary",  # not a TOML literal: read as a string
            "model.pooling='attention'",
            "train.lr=3e-4",
            "train.amp=true",
            "train.patience=none",
            "data.dev=dev.tsv",
            "run_dir=elsewhere",
        ],
    )
    assert config.model.embed_dim == 32
    assert config.model.positional == "rotary"
    assert config.model.pooling == "attention"
    assert config.train.lr == 3e-4
    assert config.train.amp is True
    assert config.train.patience is None
    assert config.data.dev == "dev.tsv"
    assert config.run_dir == Path("elsewhere")


def test_unknown_key_lists_the_valid_ones(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"model\.embed_dims.*valid keys.*embed_dim.*num_heads"):
        load_config(_write(tmp_path), ["model.embed_dims=3"])
    with pytest.raises(ValueError, match=r"unknown config section.*optim.*\[data\], \[model\]"):
        load_config(_write(tmp_path, EXAMPLE + "\n[optim]\nlr = 1\n"))
    with pytest.raises(ValueError, match="valid sections: data, model, train"):
        load_config(_write(tmp_path), ["optim.lr=1"])
    with pytest.raises(ValueError, match=r"section\.field=value"):
        load_config(_write(tmp_path), ["model.embed_dim"])


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("model.embed_dim=abc", r"model\.embed_dim: expected int, got 'abc'"),
        ("model.embed_dim=1.5", r"model\.embed_dim: expected int, got 1\.5"),
        ("train.amp=1", r"train\.amp: expected bool, got 1"),
        ("train.lr=fast", r"train\.lr: expected float, got 'fast'"),
        ("data.bpe_vocab_size=big", r"data\.bpe_vocab_size: expected int or none, got 'big'"),
        ("train.schedule=exponential", r"train\.schedule: expected one of 'linear', 'cosine'"),
        ("model.architecture=hopfield", r"model\.architecture: expected one of 'transformer'"),
        (
            "model.architecture=transformer;model.positional=nope",  # bigru reads no positions
            r"model\.positional: unknown encoding 'nope'",
        ),
        ("model.positional=nope", r"model\.positional = \"nope\": architecture 'bigru' does not"),
        ("model.architecture=transformer;model.num_heads=3", r"divisible by model\.num_heads"),
        ("train.epochs=0", r"train\.epochs must be >= 1"),
        ("data.train_fraction=1.5", r"data\.train_fraction must be in \(0, 1\]"),
        ("train.checkpoint_every=0", r"train\.checkpoint_every must be >= 1 or none, got 0"),
        ("train.checkpoint_every=often", r"train\.checkpoint_every: expected int or none"),
        ("train.max_minutes=0", r"train\.max_minutes must be > 0 or none, got 0"),
        ("train.max_minutes=-1.5", r"train\.max_minutes must be > 0 or none, got -1\.5"),
    ],
)
def test_bad_values_name_the_field(tmp_path: Path, override: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        load_config(_write(tmp_path), override.split(";"))


def test_missing_dataset_and_bad_toml(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"data\.dataset"):
        load_config(_write(tmp_path, "[model]\nembed_dim = 8\n"))
    with pytest.raises(ValueError, match=r"missing required key\(s\): data\.dataset"):
        load_config(_write(tmp_path, "[data]\nbatch_size = 8\n"))
    with pytest.raises(ValueError, match="invalid TOML"):
        load_config(_write(tmp_path, "[data\n"))


def test_errors_say_which_file_or_override_holds_the_mistake(tmp_path: Path) -> None:
    typo = _write(tmp_path, '[data]\ndataset = "x"\n[train]\nepochs = 3\nlr = 1e-3,\n', "typo.toml")
    with pytest.raises(ValueError) as info:
        load_config(typo)
    message = str(info.value)
    assert message.startswith(f"{typo}: invalid TOML: ") and "(at line 5, column 10)" in message
    assert "\n" not in message

    misspelt = _write(tmp_path, '[data]\ndataset = "x"\n[train]\nepoch = 3\n', "misspelt.toml")
    with pytest.raises(
        ValueError, match=rf"^{re.escape(str(misspelt))}: unknown key\(s\) train\.epoch; valid"
    ):
        load_config(misspelt)
    wrong_type = _write(tmp_path, '[data]\ndataset = "x"\n[train]\nepochs = "3"\n', "type.toml")
    with pytest.raises(
        ValueError, match=rf"^{re.escape(str(wrong_type))}: train\.epochs: expected int, got '3'$"
    ):
        load_config(wrong_type)
    with pytest.raises(ValueError, match=r"^train\.epochs must .* \(from --set train\.epochs=0\)$"):
        load_config(_write(tmp_path, '[data]\ndataset = "x"\n'), ["train.epochs=0"])

    latin1 = tmp_path / "latin1.toml"
    latin1.write_bytes('[data]\ndataset = "caf\u00e9"\n'.encode("latin-1"))
    with pytest.raises(
        ValueError, match=rf"^{re.escape(str(latin1))}: not UTF-8 text \(invalid .* at byte 21\)$"
    ):
        load_config(latin1)


@pytest.mark.parametrize("path", sorted(CONFIGS.glob("*.toml")), ids=lambda p: p.name)
def test_shipped_configs_load(path: Path) -> None:
    config = load_config(path)
    assert isinstance(config, Config)
    assert config.run_dir == Path("runs") / path.stem


def test_train_fraction_subsamples_training_only(tmp_path: Path) -> None:
    from selfattn.tasks import Prepared, prepare

    rows = "".join(f"{'pos' if i % 2 else 'neg'},word{i} text\n" for i in range(40))
    for name in ("train", "dev"):
        (tmp_path / f"{name}.csv").write_text(rows, encoding="utf-8")
    data = DataConfig(str(tmp_path / "train.csv"), dev=str(tmp_path / "dev.csv"))
    full = prepare(Config(data))
    part = prepare(Config(DataConfig(data.dataset, dev=data.dev, train_fraction=0.25)))
    assert isinstance(full, Prepared) and isinstance(part, Prepared)
    assert len(full.splits.train) == 40 and len(part.splits.train) == 10
    assert sorted(e.label for e in part.splits.train) == ["neg"] * 5 + ["pos"] * 5
    assert len(part.splits.dev) == 40  # dev and test are never cut
