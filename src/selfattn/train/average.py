"""Checkpoint averaging (as fairseq's ``average_checkpoints.py``; Vaswani et al. 2017, §6.1,
average the last checkpoints of a run): the element-wise mean of the weights at the ends of
the last K epochs, often a little better than any one of them.

A run keeps those checkpoints when ``train.keep_epochs`` ≥ K (``run_dir/epoch-E/``). The
average is written as an ordinary checkpoint folder that ``selfattn eval``, ``predict`` and
``export`` load; it keeps the newest checkpoint's configuration, task spec, vocabularies
and loop state, and holds no optimizer state: it is for inference, never resumed.
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch import Tensor

from selfattn.messages import plural
from selfattn.train.checkpoint import MANIFEST, Checkpoint, load_checkpoint, save_checkpoint
from selfattn.train.run_dir import epoch_checkpoints


def average_checkpoints(directories: list[Path]) -> dict[str, Tensor]:
    """The element-wise mean of the weights stored in ``directories`` (oldest first).

    Floating-point tensors are summed in float64 and the mean is cast back to their dtype;
    integer and boolean tensors (step counters, masks) are the newest checkpoint's, the
    last of ``directories``. The checkpoints are read one at a time.

    Raises:
        ValueError: no directories; an unreadable checkpoint; checkpoints of different
            models (configuration, task spec, tensor names or shapes differ).
    """
    if not directories:
        raise ValueError("no checkpoints to average")
    sums: dict[str, Tensor] = {}
    first: Checkpoint | None = None
    newest: dict[str, Tensor] = {}
    for directory in directories:
        checkpoint = load_checkpoint(directory)
        if first is None:
            first = checkpoint
            sums = {
                key: torch.zeros_like(value, dtype=torch.float64)
                for key, value in checkpoint.model_state.items()
                if value.is_floating_point()
            }
        else:
            _check_same_model(first, checkpoint)
        for key, total in sums.items():
            total += checkpoint.model_state[key]
        newest = checkpoint.model_state
    count = len(directories)
    return {
        key: (sums[key] / count).to(value.dtype) if key in sums else value.clone()
        for key, value in newest.items()
    }


def _check_same_model(first: Checkpoint, other: Checkpoint) -> None:
    """A one-line ValueError unless ``other`` stores the model ``first`` stores."""
    where = f"{first.directory} and {other.directory}"
    same_config = (first.config.model, first.config.seq2seq) == (
        other.config.model,
        other.config.seq2seq,
    )
    if not same_config or first.spec != other.spec:
        raise ValueError(
            f"{where} hold different models (model config or task spec differ); average "
            "checkpoints of one run"
        )
    a, b = first.model_state, other.model_state
    if a.keys() != b.keys():
        names = sorted(a.keys() ^ b.keys())
        raise ValueError(f"{where} hold different tensors (e.g. {names[0]}); not averaged")
    for key, value in a.items():
        if value.shape != b[key].shape or value.dtype != b[key].dtype:
            raise ValueError(
                f"{where} hold different models ({key}: {tuple(value.shape)} {value.dtype} "
                f"vs {tuple(b[key].shape)} {b[key].dtype}); not averaged"
            )


def write_average(run_dir: Path, last: int, out: Path, *, overwrite: bool = False) -> list[Path]:
    """Average the checkpoints of the last ``last`` epochs of ``run_dir`` into ``out``.

    Returns:
        The checkpoint folders averaged, oldest first.

    Raises:
        ValueError: one line: ``last`` < 1, fewer than ``last`` epoch checkpoints (set
            ``train.keep_epochs``), checkpoints of different models, ``out`` exists (and
            not ``overwrite``, or it is something other than a checkpoint folder).
    """
    run_dir, out = Path(run_dir), Path(out)
    if last < 1:
        raise ValueError(f"--last must be >= 1, got {last}")
    if not run_dir.is_dir():
        raise ValueError(f"{run_dir} does not exist (give a run folder such as runs/pos_wsj)")
    kept = epoch_checkpoints(run_dir)
    if len(kept) < last:
        names = f" ({', '.join(path.name for _, path in kept)})" if kept else ""
        raise ValueError(
            f"{run_dir} holds {plural(len(kept), 'epoch checkpoint')}{names}, fewer than "
            f"--last {last}; train with train.keep_epochs >= {last} to keep them"
        )
    _check_output(run_dir, out, overwrite)
    directories = [path for _, path in kept[-last:]]
    weights = average_checkpoints(directories)
    newest = load_checkpoint(directories[-1])
    state = {**newest.state, "averaged_from": [path.name for path in directories]}
    save_checkpoint(out, weights, None, None, state, newest.config, newest.vocabs, spec=newest.spec)
    return directories


def _check_output(run_dir: Path, out: Path, overwrite: bool) -> None:
    """Refuse to write over anything but, with ``overwrite``, a checkpoint folder."""
    if not out.exists():
        return
    if not overwrite:
        raise ValueError(f"{out} exists; choose another -o, or pass --overwrite")
    if out.resolve() == run_dir.resolve() or not (out / MANIFEST).is_file():
        raise ValueError(f"{out} exists and is not a checkpoint folder; not overwritten")
