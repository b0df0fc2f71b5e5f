"""The architecture table: each architecture's options hold exactly the fields it reads,
each checked and described once; the loader and the task types refuse through them, before
any data is read."""

from __future__ import annotations

import dataclasses
import importlib
import typing
from dataclasses import dataclass
from pathlib import Path

import pytest

from selfattn.cli.main import main
from selfattn.config import load_config
from selfattn.models.architectures import ARCHITECTURES
from selfattn.models.option_groups import EncoderOptions, ModelOptions
from selfattn.models.registry import (
    field_default,
    model_keys,
    model_options,
    register_architecture,
)
from selfattn.models.task_model import CLS_ARCHITECTURES, check_fields
from selfattn.tasks.task import Task

#: The module (its package re-exports a function of the same name).
run_module = importlib.import_module("selfattn.tasks.run")


def test_a_field_has_one_type_and_one_default_in_every_architecture() -> None:
    """A ``[model]`` key means the same wherever it is declared: one type and one default
    (what a field of an older run folder that its architecture does not read is compared
    with, :func:`~selfattn.models.registry.field_default`)."""
    first_hints: dict[str, object] = {}
    for entry in ARCHITECTURES.values():
        hints = typing.get_type_hints(entry.options)
        for item in dataclasses.fields(entry.options):
            if item.name == "architecture":
                assert item.default == entry.name
                continue
            assert item.default == field_default(item.name), (entry.name, item.name)
            first = first_hints.setdefault(item.name, hints[item.name])
            assert hints[item.name] == first, (entry.name, item.name)
    assert {"architecture", *first_hints} == set(model_keys())


@pytest.mark.parametrize("name", sorted(ARCHITECTURES))
def test_every_field_is_described_in_one_line(name: str) -> None:
    for item in dataclasses.fields(ARCHITECTURES[name].options):
        if item.name != "architecture":
            line = item.metadata.get("doc", "")
            assert line and "\n" not in line, (name, item.name)


@pytest.mark.parametrize(
    ("name", "values", "message"),
    [
        ("rnn", {"ffn_dim": 3}, r"model\.ffn_dim \(3\) must be even for the rnn"),
        ("transformer", {"embed_dim": 10}, r"divisible by model\.num_heads \(4\)"),
        ("graph", {"embed_dim": 10}, r"divisible by model\.num_heads \(4\)"),
        ("conformer", {"halting": "act"}, r"needs model\.share_weights = true"),
        ("memn2n", {"memory_tying": "x"}, r"unknown tying 'x'; choose adjacent or layerwise"),
        ("ntm", {"memory_width": 0}, r"model\.memory_width must be >= 1, got 0"),
        ("bigru", {"word_dropout": 1.0}, r"model\.word_dropout must be in \[0, 1\)"),
        ("rnn", {"score": "general"}, None),
        ("transformer", {"score": "general"}, r'general: model\.architecture = "rnn" only'),
    ],
)
def test_an_options_class_checks_what_it_reads(
    name: str, values: dict[str, object], message: str | None
) -> None:
    options = ARCHITECTURES[name].options
    if message is None:
        options(**values)  # type: ignore[arg-type]
        return
    with pytest.raises(ValueError, match=message) as error:
        options(**values)  # type: ignore[arg-type]
    assert "\n" not in str(error.value)


def test_a_name_is_registered_once_and_must_be_the_class_default() -> None:
    @dataclass(frozen=True)
    class Twice(ModelOptions):
        architecture: str = "bigru"

    with pytest.raises(ValueError, match="'bigru' is already registered"):
        register_architecture("bigru", summary="", produces={"vectors"})(Twice)

    @dataclass(frozen=True)
    class Misnamed(ModelOptions):
        architecture: str = "other"

    with pytest.raises(ValueError, match="must default to 'newcomer'"):
        register_architecture("newcomer", summary="", produces={"vectors"})(Misnamed)
    assert "newcomer" not in ARCHITECTURES


def test_pooling_cls_is_for_the_architectures_registered_with_a_cls_token() -> None:
    assert CLS_ARCHITECTURES == ("conformer", "transformer")

    @dataclass(frozen=True)
    class WithCls(EncoderOptions):
        architecture: str = "with_cls"

    register_architecture("with_cls", summary="", produces={"vectors"}, cls_token=True)(WithCls)
    try:
        check_fields(model_options("with_cls", pooling="cls"), task="sequence", text=True)
        with pytest.raises(ValueError, match=r"encoder \(conformer or transformer or with_cls\)"):
            check_fields(model_options("fc", pooling="cls"), task="sequence", text=True)
    finally:
        del ARCHITECTURES["with_cls"]


def test_a_key_no_architecture_reads_is_refused_with_what_this_one_reads() -> None:
    with pytest.raises(ValueError) as error:
        load_config(Path("configs/sentiment_rt.toml"), ["model.windowk=3"])
    message = str(error.value)
    assert "unknown key(s) model.windowk; valid keys of [model]: " in message
    assert "; architecture 'transformer' reads: " in message
    for name in ARCHITECTURES["transformer"].options.field_names():
        assert name in message
    assert "\n" not in message


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["model.window_k=3"], r"model\.window_k = 3: architecture 'transformer' does not use"),
        # ntm reads neither num_layers nor dropout: set back to their defaults, they are unset.
        (
            ['model.architecture="ntm"', "model.num_layers=2", "model.dropout=0.1"],
            r"'ntm' is for the bits task, not a sequence task; a ",
        ),
        (['model.architecture="ntm"'], r"model\.num_layers = 1: architecture 'ntm' does not use"),
        (['model.architecture="rnn"'], r"'rnn' is for the seq2seq task, not a sequence task"),
        (['model.pooling="cls"', 'data.task="seq2seq"'], r"a seq2seq task pools nothing"),
        (["seq2seq.beam_size=3"], r"seq2seq\.beam_size: the \[seq2seq\] section is for"),
    ],
)
def test_what_cannot_train_is_refused_before_any_data_is_read(
    overrides: list[str], message: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_data(*args: object, **kwargs: object) -> None:
        raise AssertionError("the data were read before the config was checked")

    monkeypatch.setattr(run_module, "load_dataset", no_data)
    monkeypatch.setattr(Task, "load_splits", no_data)
    with pytest.raises(ValueError, match=message) as error:
        # A field the architecture does not read is refused as the config loads.
        run_module.prepare(load_config(Path("configs/sentiment_rt.toml"), overrides))
    assert "\n" not in str(error.value)


def test_selfattn_config_lists_the_architectures_and_their_fields(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["config"]) == 0
    listed = [line.split()[0] for line in capsys.readouterr().out.splitlines() if line.strip()]
    assert set(ARCHITECTURES) <= set(listed)
    assert main(["config", "rnn"]) == 0
    out = capsys.readouterr().out
    rows = [line.split(" = ")[0] for line in out.splitlines() if " = " in line][1:]
    assert rows == list(ARCHITECTURES["rnn"].options.field_names())[1:]
    assert 'rnn_cell = "gru"' in out and "input_feeding = true" in out
    assert main(["config", "hopfield"]) == 2
    error = capsys.readouterr().err.strip()
    assert "expected one of 'transformer', " in error and "got 'hopfield'" in error
    assert "\n" not in error
