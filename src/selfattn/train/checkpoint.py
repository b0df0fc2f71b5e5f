"""Checkpoints that a crash can never leave half-written.

A checkpoint is a folder of three files:

* ``model-<generation>.safetensors``: the model's weights;
* ``training-<generation>.pt``: optimizer, scheduler, loss scaler and RNG states;
* ``manifest.json``: format and selfattn versions, the run's configuration, the task spec,
  the vocabularies, the loop's state (epoch, step, best metric, …), and the names and
  SHA-256 digests of the other two files.

Every file is written to a temporary name in the same folder, flushed, fsynced and then
renamed over its final name (``os.replace``, atomic on POSIX and Windows). The manifest
is written last and is the commit point: the data files of a new save carry a new
generation number, so until the new manifest replaces the old one, the old manifest
still names the old, untouched files. Only after the commit are the old files removed.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import random
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import safetensors.torch
import torch
from torch import Tensor, nn

import selfattn
from selfattn.tasks.model import TaskSpec
from selfattn.train.config import Config, config_from_dict, config_to_dict
from selfattn.train.objectives import build_for_spec

#: Bumped whenever the layout or the meaning of a stored field changes.
FORMAT_VERSION = 1
MANIFEST = "manifest.json"
_DATA_FILE = re.compile(r"^(model-\d+\.safetensors|training-\d+\.pt)$")


@dataclass
class Checkpoint:
    """Everything :func:`save_checkpoint` stored.

    Attributes:
        directory: where it was read from.
        model_state: the model's ``state_dict``.
        optimizer_state: the optimizer's ``state_dict`` (``None`` if none was saved).
        scheduler_state: the LR scheduler's ``state_dict`` (or ``None``).
        scaler_state: the AMP gradient scaler's ``state_dict`` (or ``None``).
        rng_state: Python, NumPy and torch RNG states, see :func:`set_rng_state`.
        state: the training loop's own state (JSON values).
        config: the run's configuration.
        spec: the model's inputs and labels, to rebuild it (``None`` if unknown).
        vocabs: the vocabularies, as given to :func:`save_checkpoint`.
        selfattn_version: the version that wrote it.
    """

    directory: Path
    model_state: dict[str, Tensor]
    optimizer_state: dict[str, Any] | None
    scheduler_state: dict[str, Any] | None
    scaler_state: dict[str, Any] | None
    rng_state: dict[str, Any]
    state: dict[str, Any]
    config: Config
    spec: TaskSpec | None
    vocabs: dict[str, Any]
    selfattn_version: str


def save_checkpoint(
    directory: Path,
    model: nn.Module,
    optimizer: torch.optim.Optimizer | None,
    scheduler: torch.optim.lr_scheduler.LRScheduler | None,
    state: dict[str, Any],
    config: Config,
    vocabs: dict[str, Any],
    *,
    scaler: torch.amp.GradScaler | None = None,
) -> Path:
    """Write a checkpoint into ``directory`` (created if needed), atomically.

    Args:
        directory: the checkpoint folder, e.g. ``run_dir / "last"``.
        model: its weights go to safetensors; a :class:`TaskModel`'s spec is kept too.
        optimizer: its state (or ``None``).
        scheduler: its state (or ``None``).
        state: the loop's state; JSON-serialisable values.
        config: the run's configuration.
        vocabs: JSON-serialisable vocabularies (e.g. ``{"tokens": [...], "labels": [...]}``).
        scaler: an AMP gradient scaler whose state to keep.

    Returns:
        ``directory``.

    Raises:
        TypeError: ``state`` or ``vocabs`` is not JSON-serialisable.
    """
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    generation = _current_generation(directory) + 1
    spec = getattr(model, "spec", None)
    manifest: dict[str, Any] = {
        "format_version": FORMAT_VERSION,
        "selfattn_version": selfattn.__version__,
        "generation": generation,
        "state": state,
        "config": config_to_dict(config),
        "spec": spec.to_dict() if isinstance(spec, TaskSpec) else None,
        "vocabs": vocabs,
    }
    json.dumps(manifest)  # a value JSON cannot store fails here, before any write
    training = {
        "optimizer": None if optimizer is None else optimizer.state_dict(),
        "scheduler": None if scheduler is None else scheduler.state_dict(),
        "scaler": None if scaler is None or not scaler.is_enabled() else scaler.state_dict(),
        "rng": get_rng_state(),
    }
    buffer = io.BytesIO()
    torch.save(training, buffer)
    payloads = {
        f"model-{generation:06d}.safetensors": safetensors.torch.save(_weights(model)),
        f"training-{generation:06d}.pt": buffer.getvalue(),
    }
    for name, data in payloads.items():
        write_atomic(directory / name, data)
    names = list(payloads)
    manifest["files"] = {"model": names[0], "training": names[1]}
    manifest["sha256"] = {name: hashlib.sha256(data).hexdigest() for name, data in payloads.items()}
    write_atomic(directory / MANIFEST, json.dumps(manifest, indent=1).encode())
    _remove_stale_files(directory, keep=set(names))
    return directory


def load_checkpoint(directory: Path, *, map_location: str | torch.device = "cpu") -> Checkpoint:
    """Read the checkpoint in ``directory``.

    Raises:
        ValueError: one line naming the problem: no checkpoint there, an unreadable
            manifest, a format version this selfattn cannot read, a missing or corrupt file.
    """
    directory = Path(directory)
    manifest_path = directory / MANIFEST
    if not manifest_path.is_file():
        raise ValueError(f"{directory}: no checkpoint here ({MANIFEST} is missing)")
    try:
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
        version = manifest["format_version"]
    except (json.JSONDecodeError, UnicodeDecodeError, KeyError, TypeError) as error:
        raise ValueError(f"{manifest_path}: unreadable checkpoint manifest ({error})") from None
    if version != FORMAT_VERSION:
        raise ValueError(
            f"{directory}: checkpoint format version {version} (written by selfattn "
            f"{manifest.get('selfattn_version', '?')}); this selfattn {selfattn.__version__} "
            f"reads version {FORMAT_VERSION}"
        )
    blobs = {role: _read_verified(directory, manifest, name) for role, name in _files(manifest)}
    weights = safetensors.torch.load(blobs["model"])
    training = torch.load(
        io.BytesIO(blobs["training"]), map_location=map_location, weights_only=True
    )
    return Checkpoint(
        directory=directory,
        model_state={key: value.to(map_location) for key, value in weights.items()},
        optimizer_state=training["optimizer"],
        scheduler_state=training["scheduler"],
        scaler_state=training["scaler"],
        rng_state=training["rng"],
        state=manifest["state"],
        config=config_from_dict(manifest["config"]),
        spec=None if manifest["spec"] is None else TaskSpec.from_dict(manifest["spec"]),
        vocabs=manifest["vocabs"],
        selfattn_version=manifest["selfattn_version"],
    )


def load_model(
    directory: Path,
    *,
    map_location: str | torch.device = "cpu",
    build: Callable[[Config, TaskSpec], nn.Module] = build_for_spec,
) -> tuple[nn.Module, Checkpoint]:
    """The model stored in ``directory`` (in eval mode) and its checkpoint: a
    :class:`~selfattn.tasks.TaskModel`, or a
    :class:`~selfattn.models.seq2seq.Seq2SeqTransformer` for a seq2seq task; ``build``
    makes the empty model the weights are loaded into.

    Raises:
        ValueError: as :func:`load_checkpoint`, or the checkpoint has no task spec.
    """
    checkpoint = load_checkpoint(directory, map_location=map_location)
    if checkpoint.spec is None:
        raise ValueError(f"{directory}: the checkpoint has no task spec to rebuild the model")
    model = build(checkpoint.config, checkpoint.spec)
    model.load_state_dict(checkpoint.model_state)
    return model.to(map_location).eval(), checkpoint


# ------------------------------------------------------------------------------ RNG


def get_rng_state() -> dict[str, Any]:
    """The states of Python's, NumPy's and torch's (CPU and CUDA) global generators."""
    name, keys, pos, has_gauss, gauss = np.random.get_state(legacy=True)
    state: dict[str, Any] = {
        "python": random.getstate(),
        "numpy": {
            "name": name,
            "keys": torch.from_numpy(np.asarray(keys, dtype=np.int64)),
            "pos": int(pos),
            "has_gauss": int(has_gauss),
            "gauss": float(gauss),
        },
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
    }
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    """Restore what :func:`get_rng_state` returned."""
    random.setstate(state["python"])
    numpy = state["numpy"]
    keys = numpy["keys"].numpy().astype(np.uint32)
    np.random.set_state((numpy["name"], keys, numpy["pos"], numpy["has_gauss"], numpy["gauss"]))
    torch.set_rng_state(state["torch"].cpu())
    if state["cuda"] and torch.cuda.is_available():
        torch.cuda.set_rng_state_all([s.cpu() for s in state["cuda"]])


# --------------------------------------------------------------------------- files


def write_atomic(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` so that a reader sees either the old file or all of it."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    _fsync_directory(path.parent)


def _fsync_directory(directory: Path) -> None:
    """Make a rename durable: fsync the folder (POSIX; a no-op where folders can't be opened)."""
    with contextlib.suppress(OSError, AttributeError):
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _weights(model: nn.Module) -> dict[str, Tensor]:
    """The state dict as contiguous CPU tensors, each with its own storage (safetensors
    refuses shared storage, e.g. a block repeated by weight sharing)."""
    out: dict[str, Tensor] = {}
    seen: set[int] = set()
    for key, value in model.state_dict().items():
        tensor = value.detach().cpu().contiguous()
        pointer = tensor.untyped_storage().data_ptr()
        out[key] = tensor.clone() if pointer in seen else tensor
        seen.add(pointer)
    return out


def _current_generation(directory: Path) -> int:
    """The generation of the committed checkpoint, or of any stray data file if higher."""
    generation = 0
    with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
        generation = int(json.loads((directory / MANIFEST).read_text())["generation"])
    for path in directory.iterdir():
        if _DATA_FILE.match(path.name):
            generation = max(generation, int(re.findall(r"\d+", path.name)[0]))
    return generation


def _files(manifest: dict[str, Any]) -> list[tuple[str, str]]:
    try:
        return [(role, str(manifest["files"][role])) for role in ("model", "training")]
    except (KeyError, TypeError):
        raise ValueError("checkpoint manifest does not list its files") from None


def _read_verified(directory: Path, manifest: dict[str, Any], name: str) -> bytes:
    path = directory / name
    try:
        data = path.read_bytes()
    except OSError:
        raise ValueError(f"{directory}: checkpoint file {name} is missing") from None
    expected = manifest.get("sha256", {}).get(name)
    if expected is not None and hashlib.sha256(data).hexdigest() != expected:
        raise ValueError(f"{path}: checkpoint file is corrupt (SHA-256 mismatch)")
    return data


def _remove_stale_files(directory: Path, keep: set[str]) -> None:
    """Data files of earlier generations and temporaries left by interrupted writes."""
    for path in directory.iterdir():
        stale = _DATA_FILE.match(path.name) and path.name not in keep
        if stale or (path.name.startswith(".") and path.name.endswith(".tmp")):
            with contextlib.suppress(OSError):
                path.unlink()
