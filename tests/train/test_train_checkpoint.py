"""Checkpoints: round trip, atomicity under a crash mid-save, and one-line errors."""

from __future__ import annotations

import json
import os
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from selfattn.models.composed import TaskModel
from selfattn.models.registry import model_options
from selfattn.tasks import build_for_spec
from selfattn.train import (
    Config,
    DataConfig,
    build_optimizer,
    build_scheduler,
    get_rng_state,
    load_checkpoint,
    load_model,
    save_checkpoint,
    set_rng_state,
)

from ..helpers_data import edit_json
from ..helpers_models import build

CONFIG = Config(
    DataConfig(dataset="synthetic"),
    model_options(embed_dim=16, num_heads=2, num_layers=1, ffn_dim=16),
    run_dir=Path("unused"),
)
VOCABS = {"tokens": ["<pad>", "<unk>", "a", "b"], "labels": ["X", "Y"]}


pytestmark = pytest.mark.usefixtures("one_thread")


def _model() -> TaskModel:
    return build(CONFIG.model, "token", vocab_size=4, max_len=16)


def _save(directory: Path, model: TaskModel, epoch: int) -> None:
    optimizer = build_optimizer(model, CONFIG.train)
    scheduler = build_scheduler(optimizer, CONFIG.train, total_steps=10)
    state = {"epoch": epoch, "step": 3 * epoch, "best_score": 0.5}
    save_checkpoint(directory, model, optimizer, scheduler, state, CONFIG, VOCABS)


def _weights(model: TaskModel) -> dict[str, torch.Tensor]:
    return {key: value.clone() for key, value in model.state_dict().items()}


def test_round_trip(tmp_path: Path) -> None:
    model = _model()
    _save(tmp_path / "ckpt", model, epoch=1)
    checkpoint = load_checkpoint(tmp_path / "ckpt")
    for key, value in model.state_dict().items():
        assert torch.equal(checkpoint.model_state[key], value)
    assert checkpoint.state == {"epoch": 1, "step": 3, "best_score": 0.5}
    assert checkpoint.config == CONFIG
    assert checkpoint.vocabs == VOCABS
    assert checkpoint.spec == model.spec
    assert checkpoint.optimizer_state is not None and checkpoint.scheduler_state is not None
    rebuilt, _ = load_model(tmp_path / "ckpt", build=build_for_spec)
    for key, value in model.state_dict().items():
        assert torch.equal(rebuilt.state_dict()[key], value)
    assert not rebuilt.training


def test_old_generations_and_temporaries_are_removed(tmp_path: Path) -> None:
    model = _model()
    for epoch in (1, 2, 3):
        _save(tmp_path, model, epoch)
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == ["manifest.json", "model-000003.safetensors", "training-000003.pt"]


@pytest.mark.parametrize("victim", ["model-", "training-", "manifest.json"])
def test_crash_mid_save_keeps_the_previous_checkpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, victim: str
) -> None:
    model = _model()
    _save(tmp_path, model, epoch=1)
    before = _weights(model)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(1.0)

    real_replace = os.replace

    def crashing_replace(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
        if Path(dst).name.startswith(victim):
            raise OSError("simulated crash")
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", crashing_replace)
    with pytest.raises(OSError, match="simulated crash"):
        _save(tmp_path, model, epoch=2)
    monkeypatch.undo()

    checkpoint = load_checkpoint(tmp_path)
    assert checkpoint.state["epoch"] == 1
    for key, value in before.items():
        assert torch.equal(checkpoint.model_state[key], value)
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
    _save(tmp_path, model, epoch=2)  # the next save works and cleans up the orphans
    assert load_checkpoint(tmp_path).state["epoch"] == 2
    assert len(list(tmp_path.glob("model-*"))) == 1


def _save_to(directories: list[Path], model: TaskModel, epoch: int) -> None:
    optimizer = build_optimizer(model, CONFIG.train)
    state = {"epoch": epoch, "step": 3 * epoch, "best_score": 0.5}
    first, *also = directories
    save_checkpoint(first, model, optimizer, None, state, CONFIG, VOCABS, also=also)


def _data_files(directory: Path) -> list[Path]:
    return sorted(p for p in directory.iterdir() if p.name != "manifest.json")


def test_one_save_into_two_folders_links_the_files_and_later_saves_keep_them_apart(
    tmp_path: Path,
) -> None:
    """A run's new best is also its `last`: one save, the second folder's data files hard
    links to the first's; the next save of `last` alone leaves `best` as it was."""
    last, best = tmp_path / "last", tmp_path / "best"
    model = _model()
    _save_to([best], model, epoch=1)  # a `best` of an earlier generation
    _save_to([last, best], model, epoch=2)
    at_two = _weights(model)
    for a, b in zip(_data_files(last), _data_files(best), strict=True):
        assert a.stat().st_ino == b.stat().st_ino and a.stat().st_nlink == 2
    assert [p.name for p in _data_files(best)] == ["model-000002.safetensors", "training-000002.pt"]
    for directory in (last, best):
        checkpoint = load_checkpoint(directory)  # digests checked on load
        assert checkpoint.state["epoch"] == 2 and checkpoint.optimizer_state is not None
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(1.0)
    _save_to([last], model, epoch=3)
    assert load_checkpoint(last).state["epoch"] == 3
    kept = load_checkpoint(best)
    assert kept.state["epoch"] == 2
    for key, value in at_two.items():
        assert torch.equal(kept.model_state[key], value)
    assert all(p.stat().st_nlink == 1 for p in _data_files(best))


def test_where_links_are_refused_the_second_folder_gets_its_own_copy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refused(src: object, dst: object) -> None:
        raise OSError("hard links not supported")

    monkeypatch.setattr(os, "link", refused)
    model = _model()
    _save_to([tmp_path / "last", tmp_path / "best"], model, epoch=1)
    for a, b in zip(_data_files(tmp_path / "last"), _data_files(tmp_path / "best"), strict=True):
        assert a.stat().st_ino != b.stat().st_ino and a.read_bytes() == b.read_bytes()
    assert load_checkpoint(tmp_path / "best").state["epoch"] == 1
    assert not list(tmp_path.glob("*/.*.tmp"))


def test_a_crash_while_committing_the_second_folder_keeps_its_previous_checkpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    last, best = tmp_path / "last", tmp_path / "best"
    model = _model()
    _save_to([last, best], model, epoch=1)
    real_replace = os.replace

    def crashing_replace(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
        if Path(dst) == best / "manifest.json":
            raise OSError("simulated crash")
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", crashing_replace)
    with pytest.raises(OSError, match="simulated crash"):
        _save_to([last, best], model, epoch=2)
    monkeypatch.undo()
    assert load_checkpoint(last).state["epoch"] == 2
    assert load_checkpoint(best).state["epoch"] == 1


def test_errors_are_one_line_and_name_the_problem(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"nothing: no such checkpoint folder"):
        load_checkpoint(tmp_path / "nothing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match=r"no checkpoint here \(manifest.json is missing\)"):
        load_checkpoint(tmp_path / "empty")
    model = _model()
    _save(tmp_path, model, epoch=1)
    edit_json(tmp_path / "manifest.json", format_version=99)
    with pytest.raises(ValueError, match=r"checkpoint format version 99.*reads version 1") as info:
        load_checkpoint(tmp_path)
    assert "\n" not in str(info.value)


def _flip_last_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[-1] ^= 0xFF
    path.write_bytes(bytes(data))


def _truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def _forget_digests(directory: Path) -> None:
    edit_json(directory / "manifest.json", sha256={})


def _foreign_pickle(directory: Path) -> None:
    """A training state holding an object that weights_only unpickling refuses."""
    path = next(directory.glob("training-*.pt"))
    torch.save({"optimizer": None, "scheduler": None, "scaler": None, "rng": Path("x")}, path)


def _manifest_without(key: str) -> Callable[[Path], None]:
    def edit(directory: Path) -> None:
        path = directory / "manifest.json"
        manifest = json.loads(path.read_text())
        del manifest[key]
        path.write_text(json.dumps(manifest))

    return edit


DAMAGE: dict[str, tuple[Callable[[Path], None], str, str]] = {
    # name: (what to do to the checkpoint folder, the file the message names, its words)
    "weights flipped": (
        lambda d: _flip_last_byte(next(d.glob("model-*"))),
        "model-",
        r"corrupt \(SHA-256 mismatch\)",
    ),
    "weights truncated, no digest": (
        lambda d: (_forget_digests(d), _truncate(next(d.glob("model-*")))),
        "model-",
        "damaged or truncated, not a safetensors file",
    ),
    "weights header damaged, no digest": (
        lambda d: (_forget_digests(d), next(d.glob("model-*")).write_bytes(b"\xff" * 64)),
        "model-",
        "damaged or truncated, not a safetensors file",
    ),
    "training state truncated": (
        lambda d: _truncate(next(d.glob("training-*"))),
        "training-",
        "corrupt",
    ),
    "training state truncated, no digest": (
        lambda d: (_forget_digests(d), _truncate(next(d.glob("training-*")))),
        "training-",
        "damaged or truncated, not a training state",
    ),
    "training state refused by weights_only": (
        lambda d: (_forget_digests(d), _foreign_pickle(d)),
        "training-",
        r"torch\.load\(weights_only=True\) refuses",
    ),
    "training state not a dict": (
        lambda d: (_forget_digests(d), torch.save([1, 2], next(d.glob("training-*")))),
        "training-",
        "not a selfattn training state",
    ),
    "weights missing": (
        lambda d: next(d.glob("model-*")).unlink(),
        "model-",
        "checkpoint file is missing",
    ),
    "manifest not JSON": (
        lambda d: (d / "manifest.json").write_text("{not json"),
        "manifest.json",
        "unreadable checkpoint manifest, not JSON",
    ),
    "manifest a list": (
        lambda d: (d / "manifest.json").write_text("[1]"),
        "manifest.json",
        "unreadable checkpoint manifest",
    ),
    "manifest without state": (
        _manifest_without("state"),
        "manifest.json",
        r"unreadable checkpoint manifest \(no state\)",
    ),
    "manifest without files": (
        _manifest_without("files"),
        "manifest.json",
        r"unreadable checkpoint manifest \(no files\)",
    ),
    "manifest with a broken config": (
        lambda d: edit_json(d / "manifest.json", config={"data": {}}),
        "manifest.json",
        r"unreadable stored configuration .*data\.dataset",
    ),
    "manifest with a broken spec": (
        lambda d: edit_json(d / "manifest.json", spec={"nonsense": 1}),
        "manifest.json",
        "unreadable stored configuration",
    ),
}


def _load_model(path: Path) -> Any:
    return load_model(path, build=build_for_spec)


@pytest.mark.parametrize("damage", sorted(DAMAGE))
@pytest.mark.parametrize("loader", [load_checkpoint, _load_model], ids=["checkpoint", "model"])
def test_damaged_checkpoints_are_one_line_errors_naming_the_file(
    tmp_path: Path, damage: str, loader: Callable[[Path], Any]
) -> None:
    _save(tmp_path, _model(), epoch=1)
    spoil, file_name, message = DAMAGE[damage]
    spoil(tmp_path)
    with pytest.raises(ValueError, match=message) as info:
        loader(tmp_path)
    text = str(info.value)
    assert "\n" not in text and str(tmp_path) in text and file_name in text


def test_weights_that_do_not_fit_the_model(tmp_path: Path) -> None:
    _save(tmp_path, _model(), epoch=1)
    edit_json(
        tmp_path / "manifest.json",
        config={
            **json.loads((tmp_path / "manifest.json").read_text())["config"],
            "model": {"embed_dim": 32, "num_heads": 2, "num_layers": 1, "ffn_dim": 16},
        },
    )
    with pytest.raises(ValueError, match="do not fit the model") as info:
        load_model(tmp_path, build=build_for_spec)
    assert "\n" not in str(info.value)


def test_json_incompatible_vocabs_fail_before_writing(tmp_path: Path) -> None:
    model = _model()
    optimizer = build_optimizer(model, CONFIG.train)
    with pytest.raises(TypeError):
        save_checkpoint(tmp_path, model, optimizer, None, {}, CONFIG, {"v": object()})
    assert list(tmp_path.iterdir()) == []


def test_rng_state_round_trip() -> None:
    state = get_rng_state()
    first = (random.random(), float(np.random.rand()), torch.rand(3))
    set_rng_state(state)
    again = (random.random(), float(np.random.rand()), torch.rand(3))
    assert first[:2] == again[:2]
    assert torch.equal(first[2], again[2])
