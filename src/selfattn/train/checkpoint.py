"""Checkpoints that a crash can never leave half-written.

A checkpoint is a folder of three files:

* ``model-<generation>.safetensors``: the model's weights;
* ``training-<generation>.pt``: optimizer, scheduler, loss scaler and RNG states (for a
  checkpoint taken mid-epoch also the RNG states at the epoch's start, which rebuild the
  epoch's batches);
* ``manifest.json``: format and selfattn versions, the run's configuration, the task spec,
  the vocabularies, the loop's state (epoch, step, best metric, …), and the names and
  SHA-256 digests of the other two files.

Every file is written to a temporary name in the same folder, flushed, fsynced and then
renamed over its final name (``os.replace``, atomic on POSIX and Windows). The manifest
is written last and is the commit point: the data files of a new save carry a new
generation number, so until the new manifest replaces the old one, the old manifest
still names the old, untouched files. Only after the commit are the old files removed.
One save may commit the same checkpoint to several folders (a run's new ``best`` is its
``last`` too): serialised once, the other folders' data files hard-linked to the first's,
so the second folder costs neither a second serialisation nor a second write.

Reading never ends in a traceback: a missing, truncated or damaged file, a manifest that
is not JSON or lacks a field, a training state that ``torch.load(weights_only=True)``
refuses, all raise a one-line :class:`ValueError` naming the file and the problem.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import pickle
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import safetensors.torch
import torch
from torch import Tensor, nn

import selfattn
from selfattn.config import Config, config_from_dict, config_to_dict
from selfattn.models.spec import TaskSpec
from selfattn.train.rng import get_rng_state
from selfattn.train.state_fit import load_fitting_weights

#: Bumped whenever the layout or the meaning of a stored field changes.
FORMAT_VERSION = 1
MANIFEST = "manifest.json"
_DATA_FILE = re.compile(r"^(model-\d+\.safetensors|training-\d+\.pt)$")
_MANIFEST_KEYS = ("selfattn_version", "state", "config", "spec", "vocabs", "files")
_TRAINING_KEYS = ("optimizer", "scheduler", "scaler", "rng")
_T = TypeVar("_T")


@dataclass
class Checkpoint:
    """Everything :func:`save_checkpoint` stored.

    Attributes:
        directory: where it was read from.
        model_state: the model's ``state_dict``.
        optimizer_state: the optimizer's ``state_dict`` (``None`` if none was saved).
        scheduler_state: the LR scheduler's ``state_dict`` (or ``None``).
        scaler_state: the AMP gradient scaler's ``state_dict`` (or ``None``).
        rng_state: Python, NumPy and torch RNG states, see
            :func:`~selfattn.train.rng.set_rng_state`.
        state: the training loop's own state (JSON values).
        config: the run's configuration.
        spec: the model's inputs and labels, to rebuild it (``None`` if unknown).
        vocabs: the vocabularies, as given to :func:`save_checkpoint`.
        selfattn_version: the version that wrote it.
        epoch_rng_state: for a checkpoint taken mid-epoch, the RNG states at the start of
            that epoch (``None`` at an epoch's end).
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
    epoch_rng_state: dict[str, Any] | None = None


def save_checkpoint(
    directory: Path,
    model: nn.Module | Mapping[str, Tensor],
    optimizer: torch.optim.Optimizer | Mapping[str, Any] | None,
    scheduler: torch.optim.lr_scheduler.LRScheduler | None,
    state: dict[str, Any],
    config: Config,
    vocabs: dict[str, Any],
    *,
    scaler: torch.amp.GradScaler | None = None,
    epoch_rng_state: dict[str, Any] | None = None,
    spec: TaskSpec | None = None,
    also: Sequence[Path] = (),
) -> Path:
    """Write a checkpoint into ``directory`` (created if needed), atomically.

    Args:
        directory: the checkpoint folder, e.g. ``run_dir / "last"``.
        model: its weights go to safetensors; a :class:`TaskModel`'s spec is kept too.
            Or the weights themselves, a ``state_dict`` (then give ``spec``).
        optimizer: its state (or ``None``); or that state itself, a ``state_dict``.
        scheduler: its state (or ``None``).
        state: the loop's state; JSON-serialisable values.
        config: the run's configuration.
        vocabs: JSON-serialisable vocabularies (e.g. ``{"tokens": [...], "labels": [...]}``).
        scaler: an AMP gradient scaler whose state to keep.
        epoch_rng_state: for a save in the middle of an epoch,
            :func:`~selfattn.train.rng.get_rng_state` as it was when the epoch began.
        spec: the task spec to store (default: ``model.spec``).
        also: more folders that get the same checkpoint after ``directory`` (a run's
            ``best`` when it is also ``last``), each committed atomically in turn; their
            data files are hard links to ``directory``'s where the filesystem allows (a
            later save replaces files and never writes into one, so the copies stay
            apart), else written again. Nothing is serialised twice.

    Returns:
        ``directory``.

    Raises:
        TypeError: ``state`` or ``vocabs`` is not JSON-serialisable.
    """
    directory = Path(directory)
    if spec is None:
        spec = getattr(model, "spec", None)
    manifest: dict[str, Any] = {
        "format_version": FORMAT_VERSION,
        "selfattn_version": selfattn.__version__,
        "state": state,
        "config": config_to_dict(config),
        "spec": spec.to_dict() if isinstance(spec, TaskSpec) else None,
        "vocabs": vocabs,
    }
    json.dumps(manifest)  # a value JSON cannot store fails here, before any write
    training = {
        "optimizer": optimizer.state_dict()
        if isinstance(optimizer, torch.optim.Optimizer)
        else optimizer,
        "scheduler": None if scheduler is None else scheduler.state_dict(),
        "scaler": None if scaler is None or not scaler.is_enabled() else scaler.state_dict(),
        "rng": get_rng_state(),
        "epoch_rng": epoch_rng_state,
    }
    buffer = io.BytesIO()
    torch.save(training, buffer)
    payloads = {"model": safetensors.torch.save(_weights(model)), "training": buffer.getvalue()}
    digests = {kind: hashlib.sha256(data).hexdigest() for kind, data in payloads.items()}
    written: dict[str, Path] = {}
    for folder in (directory, *map(Path, also)):
        written = _commit(folder, manifest, payloads, digests, written)
    return directory


def _commit(
    directory: Path,
    manifest: dict[str, Any],
    payloads: dict[str, bytes],
    digests: dict[str, str],
    written: dict[str, Path],
) -> dict[str, Path]:
    """Write one checkpoint folder: data files of a new generation (hard links to the
    ``written`` copies where possible), then the manifest, the commit point; the files'
    paths, for the next folder."""
    directory.mkdir(parents=True, exist_ok=True)
    generation = _current_generation(directory) + 1
    names = {
        "model": f"model-{generation:06d}.safetensors",
        "training": f"training-{generation:06d}.pt",
    }
    paths = {}
    for kind, name in names.items():
        paths[kind] = directory / name
        if kind not in written or not _link_atomic(written[kind], paths[kind]):
            write_atomic(paths[kind], payloads[kind])
    stored = {
        **manifest,
        "generation": generation,
        "files": names,
        "sha256": {names[kind]: digests[kind] for kind in names},
    }
    write_atomic(directory / MANIFEST, json.dumps(stored, indent=1).encode())
    _remove_stale_files(directory, keep=set(names.values()))
    return paths


def load_checkpoint(directory: Path, *, map_location: str | torch.device = "cpu") -> Checkpoint:
    """Read the checkpoint in ``directory``.

    Raises:
        ValueError: one line naming the file and the problem: no checkpoint there, a
            manifest that is not JSON or lacks a field, a format version this selfattn
            cannot read, a missing, truncated or corrupt data file.
    """
    directory = Path(directory)
    manifest_path = directory / MANIFEST
    manifest = _read_manifest(directory)
    paths = {role: directory / name for role, name in _files(manifest_path, manifest)}
    blobs = {role: _read_verified(path, manifest) for role, path in paths.items()}
    weights = _decode(
        paths["model"], "a safetensors file", lambda: safetensors.torch.load(blobs["model"])
    )
    training = _decode(
        paths["training"],
        "a training state",
        lambda: torch.load(
            io.BytesIO(blobs["training"]), map_location=map_location, weights_only=True
        ),
    )
    if not isinstance(training, dict) or not all(key in training for key in _TRAINING_KEYS):
        raise ValueError(
            f"{paths['training']}: not a selfattn training state (it must hold "
            f"{', '.join(_TRAINING_KEYS)})"
        )
    try:
        config = config_from_dict(manifest["config"])
        spec = None if manifest["spec"] is None else TaskSpec.from_dict(manifest["spec"])
    except (ValueError, TypeError, KeyError, AttributeError) as error:
        # Format 1 manifests written while [model] was one flat section store every field;
        # config_from_dict drops those the architecture does not read while they hold a
        # default, so only a field set to something else, which no model read, ends here.
        raise ValueError(
            f"{manifest_path}: unreadable stored configuration of checkpoint format "
            f"{manifest['format_version']} ({error}); fix that field in the manifest's "
            '"config" (a [model] field its architecture does not read: remove it)'
        ) from None
    return Checkpoint(
        directory=directory,
        model_state={key: value.to(map_location) for key, value in weights.items()},
        optimizer_state=training["optimizer"],
        scheduler_state=training["scheduler"],
        scaler_state=training["scaler"],
        rng_state=training["rng"],
        state=manifest["state"],
        config=config,
        spec=spec,
        vocabs=manifest["vocabs"],
        selfattn_version=manifest["selfattn_version"],
        epoch_rng_state=training.get("epoch_rng"),
    )


def load_model(
    directory: Path,
    *,
    map_location: str | torch.device = "cpu",
    build: Callable[[Config, TaskSpec], nn.Module],
) -> tuple[nn.Module, Checkpoint]:
    """The model stored in ``directory`` (in eval mode) and its checkpoint: a
    :class:`~selfattn.models.TaskModel`, or a
    :class:`~selfattn.models.seq2seq.Seq2SeqTransformer` for a seq2seq task; ``build``
    makes the empty model the weights are loaded into.

    Raises:
        ValueError: as :func:`load_checkpoint`, the checkpoint has no task spec, its
            weights hold nan or ±inf (a model that would answer nan), or they do not fit
            the model it describes (the first tensor that differs).
    """
    checkpoint = load_checkpoint(directory, map_location=map_location)
    if checkpoint.spec is None:
        raise ValueError(f"{directory}: the checkpoint has no task spec to rebuild the model")
    bad = next(
        (
            name
            for name, tensor in checkpoint.model_state.items()
            if tensor.is_floating_point() and not bool(torch.isfinite(tensor).all())
        ),
        None,
    )
    if bad is not None:
        raise ValueError(
            f"{directory}: the stored weights hold nan or inf ({bad}): the run trained to "
            "nan; train it again with a lower train.lr, or use another checkpoint"
        )
    model = build(checkpoint.config, checkpoint.spec)
    load_fitting_weights(
        model,
        checkpoint.model_state,
        f"{directory}: the stored weights do not fit the model its configuration describes",
    )
    return model.to(map_location).eval(), checkpoint


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


def _link_atomic(source: Path, path: Path) -> bool:
    """Make ``path`` a hard link to ``source``, atomically as :func:`write_atomic`; False
    where the filesystem refuses (then nothing changed)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        os.link(source, tmp)
        os.replace(tmp, path)
    except OSError:
        with contextlib.suppress(OSError):
            tmp.unlink()
        return False
    _fsync_directory(path.parent)
    return True


def _fsync_directory(directory: Path) -> None:
    """Make a rename durable: fsync the folder (POSIX; a no-op where folders can't be opened)."""
    with contextlib.suppress(OSError, AttributeError):
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _weights(model: nn.Module | Mapping[str, Tensor]) -> dict[str, Tensor]:
    """The state dict as contiguous CPU tensors, each with its own storage (safetensors
    refuses shared storage, e.g. a block repeated by weight sharing)."""
    out: dict[str, Tensor] = {}
    seen: set[int] = set()
    state = model.state_dict() if isinstance(model, nn.Module) else model
    for key, value in state.items():
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


def _read_manifest(directory: Path) -> dict[str, Any]:
    """The manifest as a dict with every key :func:`load_checkpoint` needs."""
    path = directory / MANIFEST
    if not directory.exists():
        raise ValueError(f"{directory}: no such checkpoint folder")
    if not path.is_file():
        raise ValueError(f"{directory}: no checkpoint here ({MANIFEST} is missing)")
    try:
        manifest = json.loads(path.read_bytes())
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise ValueError(f"{path}: unreadable checkpoint manifest, not JSON ({error})") from None
    except OSError as error:
        raise ValueError(
            f"{path}: cannot read the checkpoint manifest ({error.strerror})"
        ) from None
    if not isinstance(manifest, dict) or "format_version" not in manifest:
        raise ValueError(f"{path}: unreadable checkpoint manifest (no format_version)")
    version = manifest["format_version"]
    if version != FORMAT_VERSION:
        raise ValueError(
            f"{directory}: checkpoint format version {version} (written by selfattn "
            f"{manifest.get('selfattn_version', '?')}); this selfattn {selfattn.__version__} "
            f"reads version {FORMAT_VERSION}"
        )
    missing = [key for key in _MANIFEST_KEYS if key not in manifest]
    if missing:
        raise ValueError(f"{path}: unreadable checkpoint manifest (no {', '.join(missing)})")
    return manifest


def _files(manifest_path: Path, manifest: dict[str, Any]) -> list[tuple[str, str]]:
    try:
        return [(role, str(manifest["files"][role])) for role in ("model", "training")]
    except (KeyError, TypeError):
        raise ValueError(
            f"{manifest_path}: unreadable checkpoint manifest (it does not list its files)"
        ) from None


def _read_verified(path: Path, manifest: dict[str, Any]) -> bytes:
    try:
        data = path.read_bytes()
    except OSError:
        raise ValueError(f"{path}: checkpoint file is missing (the manifest lists it)") from None
    digests = manifest.get("sha256")
    expected = digests.get(path.name) if isinstance(digests, dict) else None
    if expected is not None and hashlib.sha256(data).hexdigest() != expected:
        raise ValueError(f"{path}: checkpoint file is corrupt (SHA-256 mismatch)")
    return data


def _decode(path: Path, what: str, read: Callable[[], _T]) -> _T:
    """``read()``, with any failure turned into one line naming ``path``."""
    try:
        return read()
    except pickle.UnpicklingError as error:
        if "weights only" not in str(error).lower():
            raise ValueError(f"{path}: damaged, not {what} ({_reason(error)})") from None
        raise ValueError(
            f"{path}: torch.load(weights_only=True) refuses it, as it holds Python objects "
            "that no selfattn checkpoint holds; not loaded"
        ) from None
    except Exception as error:  # safetensors, zip and pickle readers each raise their own
        raise ValueError(f"{path}: damaged or truncated, not {what} ({_reason(error)})") from None


def _reason(error: BaseException) -> str:
    """The first sentence of an error message, on one line."""
    text = re.sub(r"\x1b\[[0-9;]*m", "", str(error)).strip().split("\n")[0]
    sentence = text.split(". ")[0].rstrip(".")
    return (sentence[:200] + "…") if len(sentence) > 200 else sentence or type(error).__name__


def _remove_stale_files(directory: Path, keep: set[str]) -> None:
    """Data files of earlier generations and temporaries left by interrupted writes."""
    for path in directory.iterdir():
        stale = _DATA_FILE.match(path.name) and path.name not in keep
        if stale or (path.name.startswith(".") and path.name.endswith(".tmp")):
            with contextlib.suppress(OSError):
                path.unlink()
