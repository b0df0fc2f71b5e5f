"""How a run starts (:func:`start_run`): claiming its folder, building what it trains, and
for a resumed run putting back what ``last`` holds (weights, optimizer, schedule, RNG
states, the loop's state) and the batches left in the epoch it stopped in.

A run resumed from ``run_dir/last/`` has its weights, optimizer, schedule, RNG states,
counters and the epoch's running sums restored. Mid-epoch, it calls
``train_batches(epoch)`` again from the RNG state that epoch began with, skips the batches
already trained on, and then restores the RNG state of the saved step (so a generator may
also draw batch by batch). It ends in exactly the state an uninterrupted run reaches (on
the CPU; CUDA kernels need not be deterministic).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sized
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from selfattn.config import Config, config_to_toml
from selfattn.folder_lock import hold
from selfattn.models.checkpointing import enable_activation_checkpointing
from selfattn.models.spec import TaskSpec
from selfattn.train.checkpoint import Checkpoint, load_checkpoint, write_atomic
from selfattn.train.compile import CompileWatch, compile_model
from selfattn.train.distributed import Distributed, check_world_size
from selfattn.train.init_from import load_initial_weights
from selfattn.train.loop_state import LoopState, Parts
from selfattn.train.objective import Objective
from selfattn.train.optim import WarmupDecay, build_optimizer, build_scheduler
from selfattn.train.rng import get_rng_state, seed_everything, set_rng_state
from selfattn.train.run_dir import (
    check_compatible,
    checkpoint_to_resume,
    claim_run_dir,
    make_run_dir,
    truncate_metrics,
)
from selfattn.train.state_fit import optimizer_misfit, weights_misfit

#: ``epoch → batches``, see :mod:`selfattn.train.loop`.
TrainBatches = Callable[[int], Iterable[Any]]


@dataclass
class Started:
    """A run ready for its epochs.

    Attributes:
        parts: what it trains.
        state: the loop's state, as the run was left (or a new run's).
        history: the metrics lines of the epochs already run.
        total_steps: optimizer steps of the whole run.
        resumed: whether it goes on from ``last``.
        first_epoch: a new run's first epoch of batches (drawn for its length).
        initialised_from: where ``train.init_from`` took the weights from, if it did.
        trained_by: processes that trained the run before it was resumed.
        compiled: what compiling the model costs (``train.compile``), else ``None``.
    """

    parts: Parts
    state: LoopState
    history: list[dict[str, Any]]
    total_steps: int
    resumed: bool
    first_epoch: Iterable[Any] | None = None
    initialised_from: Path | None = None
    trained_by: int = 1
    compiled: CompileWatch | None = None


def start_run(
    config: Config,
    spec: TaskSpec,
    objective: Objective,
    train_batches: TrainBatches,
    vocabs: dict[str, Any],
    device: torch.device,
    dist: Distributed,
    amp_dtype: torch.dtype | None,
    *,
    resume: bool,
    overwrite: bool,
) -> Started:
    """Claim ``config.run_dir`` (or find ``last`` to ``resume``), seed, build the model,
    optimizer and schedule, and put back what ``last`` holds; see :class:`Started`.

    Raises:
        ValueError: the folder holds a run (without ``overwrite``); nothing to resume; a
            checkpoint that cannot be resumed or is of another model.
    """
    train_config = config.train
    run_dir = Path(config.run_dir)
    last = checkpoint_to_resume(run_dir) if resume else None
    claim(run_dir, dist, fresh=last is None, overwrite=overwrite)
    if train_config.threads is not None:  # None: the count the process runs with
        from selfattn.runtime import configure_threads

        configure_threads(train_config.threads)
    seed_everything(train_config.seed)
    model, initialised_from = model_to_train(
        objective, config, spec, vocabs, device, fresh=last is None
    )
    compiled = None
    if train_config.compile:  # in place: the model's state_dict keys stay an eager run's
        compiled = CompileWatch.start()
        compile_model(model, config.model.architecture)
    loss = dist.wrap(model, objective)  # FSDP shards: the optimizer comes after
    optimizer = build_optimizer(model, train_config)
    # float16's small range needs the loss scaled up; bf16 keeps float32's range
    scaler = torch.amp.GradScaler("cuda") if amp_dtype is torch.float16 else None
    epoch_rng = get_rng_state()  # what train_batches(0) draws from
    first_epoch: Iterable[Any] | None = None
    checkpoint: Checkpoint | None = None
    if last is not None:
        checkpoint, state = load_to_resume(last, config, spec, device)
    else:
        first_epoch = epoch_batches(train_batches, 0)
        assert isinstance(first_epoch, Sized)
        state = LoopState(steps_per_epoch=len(first_epoch), threads=torch.get_num_threads())
    trained_by, state.world_size = state.world_size, dist.size
    if dist.size > 1:
        check_world_size(dist.size, config.data.batch_size, state.steps_per_epoch)
    total_steps = state.steps_per_epoch * train_config.epochs
    if train_config.max_steps is not None:
        total_steps = min(total_steps, train_config.max_steps)
    scheduler = build_scheduler(optimizer, train_config, total_steps)
    parts = Parts(model, optimizer, scheduler, scaler, loss, epoch_rng)
    history: list[dict[str, Any]] = []
    if checkpoint is not None:
        history = restore(parts, checkpoint, state, total_steps, dist, run_dir)
    elif dist.is_main():
        write_atomic(run_dir / "config.toml", config_to_toml(config).encode())
    return Started(
        parts,
        state,
        history,
        total_steps,
        resumed=checkpoint is not None,
        first_epoch=first_epoch,
        initialised_from=initialised_from,
        trained_by=trained_by,
        compiled=compiled,
    )


def claim(run_dir: Path, dist: Distributed, *, fresh: bool, overwrite: bool) -> None:
    """Create ``run_dir``, lock it (:mod:`selfattn.folder_lock`: one training at a
    time in a folder) and, for a ``fresh`` run, claim it (rank 0; its refusal is every
    rank's): a run folder that is a file, cannot be written or is being trained by another
    process is refused in one line before anything is built."""
    refusal = None
    if dist.is_main():
        try:
            make_run_dir(run_dir)
            hold(run_dir, "a training")  # given back by Trainer.run, however it ends
            if fresh:
                claim_run_dir(run_dir, overwrite)
        except ValueError as error:
            if dist.size == 1:
                raise
            refusal = str(error)
    dist.settle(refusal)


def model_to_train(
    objective: Objective,
    config: Config,
    spec: TaskSpec,
    vocabs: dict[str, Any],
    device: torch.device,
    *,
    fresh: bool,
) -> tuple[nn.Module, Path | None]:
    """The model ``objective`` builds, on ``device``, with ``train.init_from``'s weights
    for a ``fresh`` run (a resumed one reads ``last``) and its blocks recomputed in
    backward when ``train.checkpoint_activations`` asks; and where its weights came from
    (``None``: initialised here).

    Raises:
        ValueError: ``train.checkpoint_activations`` for a model without blocks.
    """
    model = objective.build().to(device)
    initialised_from = None
    if fresh and config.train.init_from is not None:
        initialised_from = load_initial_weights(model, config.train.init_from, config, spec, vocabs)
    if config.train.checkpoint_activations and not enable_activation_checkpointing(model):
        raise ValueError(
            f"train.checkpoint_activations = true: architecture "
            f"{config.model.architecture!r} has no stack of blocks to recompute; "
            "leave it false"
        )
    return model, initialised_from


def load_to_resume(
    last: Path, config: Config, spec: TaskSpec, device: torch.device
) -> tuple[Checkpoint, LoopState]:
    """The checkpoint in ``last`` and the loop state it stores, on ``device``; a resumed
    run with the default thread count takes the count the run started with.

    Raises:
        ValueError: an averaged checkpoint; one of another model (see
            :func:`~selfattn.train.run_dir.check_compatible`); an unreadable one or loop state.
    """
    checkpoint = load_checkpoint(last, map_location=device)
    if "averaged_from" in checkpoint.state:
        raise ValueError(
            f"{last} is an average of checkpoints, for inference only (it holds no "
            "optimizer state); it cannot be resumed"
        )
    check_compatible(last, config, spec, checkpoint.config, checkpoint.spec)
    state = LoopState.from_dict(checkpoint.state, source=str(last))
    if config.train.threads is None and state.threads is not None:
        # The default count follows the machine's load; a resumed run keeps the
        # count its run started with, so it ends as an uninterrupted run would.
        torch.set_num_threads(state.threads)
    return checkpoint, state


def restore(
    parts: Parts,
    checkpoint: Checkpoint,
    state: LoopState,
    total_steps: int,
    dist: Distributed,
    run_dir: Path,
) -> list[dict[str, Any]]:
    """Put the run back as ``checkpoint`` left it; returns the metrics lines kept.

    Raises:
        ValueError: weights or optimizer state of another shape than the model's (one
            line naming the first tensor that differs), before anything is loaded.
    """
    misfit = weights_misfit(parts.model, checkpoint.model_state)
    if misfit is None and checkpoint.optimizer_state is not None:
        misfit = optimizer_misfit(parts.model, parts.optimizer, checkpoint.optimizer_state)
    if misfit is not None:
        raise ValueError(
            f"{checkpoint.directory}: the stored state does not fit the model its "
            f"configuration describes ({misfit}); resume with the run that wrote it"
        )
    # The optimizer's settings as this run's configuration gives them: loading the stored
    # state would otherwise put back the weight decay the run was started with.
    configured = [
        {k: v for k, v in g.items() if k != "params"} for g in parts.optimizer.param_groups
    ]
    dist.load(parts.model, parts.optimizer, checkpoint.model_state, checkpoint.optimizer_state)
    for group, settings in zip(parts.optimizer.param_groups, configured, strict=True):
        for key in ("weight_decay", "betas", "eps"):
            if key in settings:
                group[key] = settings[key]
    if checkpoint.scheduler_state is not None:
        parts.scheduler.load_state_dict(checkpoint.scheduler_state)
        # A resumed run may have been given more epochs: stretch the decay to them.
        schedule = parts.scheduler.lr_lambdas[0]
        assert isinstance(schedule, WarmupDecay)
        schedule.total_steps = max(total_steps, 1)
    if parts.scaler is not None and checkpoint.scaler_state is not None:
        parts.scaler.load_state_dict(checkpoint.scaler_state)
    parts.epoch_rng = checkpoint.epoch_rng_state
    if state.batch and parts.epoch_rng is None:
        raise ValueError(
            f"{checkpoint.directory}: a mid-epoch checkpoint without its epoch's RNG state"
        )
    set_rng_state(checkpoint.rng_state)
    return truncate_metrics(run_dir, state.epoch) if dist.is_main() else []


def batches_to_train(started: Started, epoch: int, train_batches: TrainBatches) -> Iterable[Any]:
    """The batches left to train in ``epoch``: those after the ones done when the run
    stopped mid-epoch, else all; ``parts.epoch_rng`` becomes the RNG state they are drawn
    from."""
    state, parts = started.state, started.parts
    if state.batch:  # resuming mid-epoch
        return remaining_batches(train_batches, epoch, state.batch, parts.epoch_rng)
    if epoch == 0 and started.first_epoch is not None:
        return started.first_epoch
    parts.epoch_rng = get_rng_state()
    return epoch_batches(train_batches, epoch)


def epoch_batches(train_batches: TrainBatches, epoch: int) -> Iterable[Any]:
    """``train_batches(epoch)``; the first epoch's as a list (the loop needs its length)."""
    batches = train_batches(epoch)
    if epoch == 0 and not isinstance(batches, Sized):
        batches = list(batches)
    return batches


def remaining_batches(
    train_batches: TrainBatches, epoch: int, done: int, epoch_rng: dict[str, Any] | None
) -> Iterator[Any]:
    """The batches of ``epoch`` after the first ``done``, as an uninterrupted run sees
    them: drawn from the RNG state the epoch began with, then the RNG put back."""
    assert epoch_rng is not None
    now = get_rng_state()
    set_rng_state(epoch_rng)
    remaining = iter(epoch_batches(train_batches, epoch))
    for _ in range(done):
        next(remaining, None)
    set_rng_state(now)
    return remaining
