"""Training on several processes: torchrun's ranks, DistributedDataParallel or FSDP2.

``torchrun --nproc_per_node=N -m selfattn train CONFIG`` (or ``selfattn train CONFIG
--nproc N``) starts N ranks. Every rank builds the same seeded list of global batches of
``data.batch_size`` examples and trains on its share of each, examples ``[rank::N]``
(:func:`share`), so the batch order, the epoch's RNG state and resuming are those of one
process, and N processes follow the trajectory of one: each rank's loss, a mean over its
own units (tokens or examples), is scaled by ``units_r · N / units`` (:meth:`Distributed.reduce`),
so that after the gradient averaging of DDP or FSDP the gradient is the mean over the
global batch. (A seq2seq run's guided-attention, coverage and NAT terms are weighted by
the same token share, which makes them close to, not exactly, one process's.) With
dropout, each rank draws its own masks, so only runs without dropout repeat to the bit.

``train.distributed`` is read only when ``WORLD_SIZE`` > 1: ``"ddp"`` keeps a replica of
the model per rank; ``"fsdp"`` shards parameters, gradients and optimizer state with
``torch.distributed.fsdp.fully_shard`` per block of every stack and at the root. Either
way rank 0 alone writes checkpoints (full, unwrapped state dicts that load in one
process), ``metrics.jsonl`` and the console; every rank evaluates the whole dev set, so
every rank takes the same best-epoch and early-stopping decisions.
"""

from __future__ import annotations

import contextlib
import ctypes
import datetime
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator, Mapping, MutableMapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar, cast

import torch
import torch.distributed as dist
from torch import Tensor, nn

from selfattn.specials import IGNORE_INDEX

T = TypeVar("T")
#: The environment variables of a torchrun rank; all are needed to join the others.
RENDEZVOUS = ("RANK", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")


@dataclass(frozen=True)
class World:
    """Which process this is among how many (torchrun's ``RANK``, ``WORLD_SIZE``)."""

    rank: int = 0
    size: int = 1
    local_rank: int = 0
    local_size: int = 1


def world_from_env(environ: Mapping[str, str] | None = None) -> World:
    """This process's place in torchrun's job; a single process without ``WORLD_SIZE`` > 1.

    Raises:
        ValueError: ``WORLD_SIZE`` > 1 without the rest of torchrun's variables.
    """
    environ = os.environ if environ is None else environ
    size = int(environ.get("WORLD_SIZE", "1"))
    if size <= 1:
        return World()
    missing = [name for name in RENDEZVOUS if name not in environ]
    if missing:
        raise ValueError(
            f"torchrun without a rendezvous: WORLD_SIZE={size} is set but "
            f"{', '.join(missing)} {'is' if len(missing) == 1 else 'are'} not; launch with "
            "torchrun or `selfattn train --nproc N`"
        )
    return World(
        rank=int(environ["RANK"]),
        size=size,
        local_rank=int(environ["LOCAL_RANK"]),
        local_size=int(environ.get("LOCAL_WORLD_SIZE", "1")),
    )


def check_world_size(size: int, batch_size: int, batches_per_epoch: int | None = None) -> None:
    """Refuse a world size that cannot share every global batch.

    Raises:
        ValueError: ``size`` < 1, not dividing ``data.batch_size``, or more than the
            batches of an epoch.
    """
    if size < 1:
        raise ValueError(f"--nproc must be at least 1, got {size}")
    if batch_size % size:
        raise ValueError(
            f"{size} processes do not divide data.batch_size = {batch_size}: each process "
            "takes an equal share of every batch; choose a divisor"
        )
    if batches_per_epoch is not None and size > batches_per_epoch:
        raise ValueError(
            f"{size} processes for an epoch of only {batches_per_epoch} batches; use at "
            f"most {batches_per_epoch}"
        )


@dataclass(frozen=True)
class EmptyShare:
    """A rank's share of a global batch smaller than the world: the batch's first
    example stands in (``batch``) so the rank joins the gradient reduction, with weight 0."""

    batch: Any


def share(group: Sequence[T], collate: Callable[[Sequence[T]], Any]) -> Any:
    """This rank's part of the global batch ``group``: ``collate(group[rank::size])``
    (``collate(group)`` in one process), or an :class:`EmptyShare`."""
    world = world_from_env()
    if world.size == 1:
        return collate(group)
    mine = group[world.rank :: world.size]
    return collate(mine) if len(mine) else EmptyShare(collate(group[:1]))


def unpack(item: Any) -> tuple[Any, bool]:
    """``(batch, counts)``: the batch to run and whether its units count."""
    if isinstance(item, EmptyShare):
        return item.batch, False
    return item, True


def units(batch: Any) -> int:
    """What a batch's loss is the mean over: its labels that are not ``IGNORE_INDEX``."""
    return int((batch.labels != IGNORE_INDEX).sum())


@dataclass(frozen=True)
class StepTotals:
    """One optimizer step's sums over the global batch: ``loss · units``, units, tokens.

    ``loss_sum`` is a 0-dim float64 tensor on the loss's device: reading it waits for the
    step's forward pass, so the training loop reads it only when it shows or saves it.
    ``skipped``: ``train.nan_policy = "skip"`` skipped the step's update (its loss was not
    finite; it then counts no loss and no units).
    """

    loss_sum: Tensor
    units: int
    tokens: int
    skipped: bool = False


class _ObjectiveLoss(nn.Module):
    """``objective.loss(model, batch, step)`` as a module's ``forward``: DDP and FSDP hook
    into ``forward``, and an objective may call any of the model's methods."""

    def __init__(self, model: nn.Module, objective: Any) -> None:
        super().__init__()
        self.model = model
        self.objective = objective

    def forward(self, batch: Any, step: int) -> Tensor:
        return self.objective.loss(self.model, batch, step)


class Distributed:
    """What the training loop asks about the other processes; in one process every
    answer is that of one process (nothing is wrapped, reduced or gathered).

    Args:
        world: this process's place (:func:`world_from_env`).
        strategy: ``"ddp"`` or ``"fsdp"`` (``train.distributed``).
        timeout: seconds a collective waits for the other ranks before the job fails.
    """

    def __init__(self, world: World, strategy: str = "ddp", timeout: float = 300.0) -> None:
        self.world = world
        self.strategy = strategy
        self.timeout = timeout
        self._wrapper: nn.Module | None = None

    @property
    def size(self) -> int:
        return self.world.size

    def is_main(self) -> bool:
        """Whether this process writes files and shows progress (rank 0)."""
        return self.world.rank == 0

    def describe(self) -> str:
        """``2 processes (ddp)`` for the opening line; empty in one process."""
        return "" if self.size == 1 else f" × {self.size} processes ({self.strategy})"

    # ------------------------------------------------------------------ the group

    def start(self, device: torch.device) -> torch.device:
        """Join the process group (gloo on the CPU, nccl on CUDA); returns the device this
        rank trains on (its local GPU on CUDA)."""
        if self.size == 1:
            return device
        stop_with_launcher()
        if device.type == "cuda":
            device = torch.device("cuda", self.world.local_rank)
            torch.cuda.set_device(device)
        if not dist.is_initialized():
            _import_world_defaults()
            dist.init_process_group(
                "nccl" if device.type == "cuda" else "gloo",
                timeout=datetime.timedelta(seconds=self.timeout),
            )
        self._device = device
        return device

    def close(self, *, wait: bool = True) -> None:
        """Leave the process group after a barrier (so every rank ends once rank 0 has
        written its files); a failing rank (``wait`` false) leaves it as it is."""
        if self.size == 1 or not dist.is_initialized():
            return
        if not wait:  # its process ends next, which fails the other ranks at once
            # Ended here, the group would die when the traceback lets DDP's reducer go:
            # holding the GIL, waiting for gloo's thread, which may need the GIL.
            return
        dist.barrier()
        # The group must end here, not while the interpreter shuts down: torn down
        # then, with gloo's threads still running, a rank can abort ("terminate called
        # without an active exception"). Whatever still holds the group keeps it: DDP's
        # reducer (let go here) and default arguments captured at import (see
        # _import_world_defaults).
        self._wrapper = None
        dist.destroy_process_group()

    def settle(self, error: str | None) -> None:
        """Raise rank 0's refusal (``error``, a message or ``None``) on every rank."""
        if self.size == 1:
            if error is not None:
                raise ValueError(error)
            return
        box = [error]
        dist.broadcast_object_list(box, src=0)
        if box[0] is not None:
            raise ValueError(box[0])

    # ------------------------------------------------------------------ the model

    def wrap(self, model: nn.Module, objective: Any) -> Callable[[Any, int], Tensor]:
        """Wrap ``model`` for its strategy (FSDP shards it in place: build the optimizer
        after this); returns ``(batch, step) → loss``."""
        if self.size == 1:
            return lambda batch, step: objective.loss(model, batch, step)
        loss = _ObjectiveLoss(model, objective)
        if self.strategy == "fsdp":
            from torch.distributed.fsdp import fully_shard

            for block in stack_blocks(model):
                fully_shard(block)
            fully_shard(loss)
            self._wrapper = loss
            return loss
        device_ids = [self._device.index] if self._device.type == "cuda" else None
        wrapped = nn.parallel.DistributedDataParallel(
            loss, device_ids=device_ids, static_graph=True
        )
        self._wrapper = wrapped
        return wrapped

    def reduce(self, loss: Tensor, n: int, tokens: int) -> tuple[Tensor, StepTotals]:
        """The loss to back-propagate and the step's global sums, from this rank's loss,
        units ``n`` and ``tokens`` (counted on the host: no wait for the device).

        In one process ``loss`` itself, and nothing waits for the device. With N ranks,
        ``loss · units_r · N / units`` (the gradient averaging of DDP / FSDP then gives
        the gradient of the global mean), which needs the global units at once.
        """
        loss_sum = loss.detach().double() * n
        if self.size == 1:
            return loss, StepTotals(loss_sum, n, tokens)
        counts = torch.tensor([n, tokens], dtype=torch.float64, device=self._device)
        sums = torch.cat([counts[:1], loss_sum.reshape(1).to(self._device), counts[1:]])
        dist.all_reduce(sums)
        total = int(sums[0])
        scale = n * self.size / max(total, 1)
        return loss * scale, StepTotals(sums[1], total, int(sums[2]))

    def agree(self, *flags: bool) -> tuple[bool, ...]:
        """Each flag, true on any rank (so all ranks stop or save at the same step)."""
        if self.size == 1:
            return flags
        votes = torch.tensor([int(flag) for flag in flags], device=self._device)
        dist.all_reduce(votes)
        return tuple(bool(vote) for vote in votes.tolist())

    @contextlib.contextmanager
    def evaluating(self) -> Iterator[None]:
        """Around dev evaluation of the unwrapped model: FSDP gathers the root's
        parameters (the blocks gather their own in their forward)."""
        if self.strategy != "fsdp" or self._wrapper is None:
            yield
            return
        self._wrapper.unshard()  # type: ignore[operator]
        try:
            yield
        finally:
            self._wrapper.reshard()  # type: ignore[operator]

    # ------------------------------------------------------------------ checkpoints

    def states(
        self, model: nn.Module, optimizer: torch.optim.Optimizer | None
    ) -> tuple[nn.Module | dict[str, Tensor], Any]:
        """What :func:`~selfattn.train.checkpoint.save_checkpoint` takes as the model and
        the optimizer: the unwrapped model and the optimizer in one process or DDP; full
        CPU state dicts under FSDP (gathered by every rank, complete on rank 0 only)."""
        if self.strategy != "fsdp" or self.size == 1:
            return model, optimizer
        from torch.distributed.checkpoint.state_dict import (
            StateDictOptions,
            get_model_state_dict,
            get_optimizer_state_dict,
        )

        options = StateDictOptions(full_state_dict=True, cpu_offload=True)
        weights = cast(dict[str, Tensor], get_model_state_dict(model, options=options))
        if optimizer is None:
            return weights, None
        by_name = get_optimizer_state_dict(model, optimizer, options=options)
        if not self.is_main():  # cpu_offload leaves the other ranks empty
            return weights, None
        return weights, _indexed(by_name, _parameter_names(model, optimizer))

    def load(
        self,
        model: nn.Module,
        optimizer: torch.optim.Optimizer,
        weights: Mapping[str, Tensor],
        optimizer_state: dict[str, Any] | None,
    ) -> None:
        """Load a full checkpoint (as :meth:`states` writes it) on every rank."""
        if self.strategy != "fsdp" or self.size == 1:
            model.load_state_dict(weights)
            if optimizer_state is not None:
                optimizer.load_state_dict(optimizer_state)
            return
        from torch.distributed.checkpoint.state_dict import (
            StateDictOptions,
            set_model_state_dict,
            set_optimizer_state_dict,
        )

        options = StateDictOptions(full_state_dict=True, broadcast_from_rank0=True)
        set_model_state_dict(model, dict(weights), options=options)
        if optimizer_state is not None:
            names = _parameter_names(model, optimizer)
            set_optimizer_state_dict(
                model, optimizer, _named(optimizer_state, names), options=options
            )


def _import_world_defaults() -> None:
    """Import, before the process group exists, PyTorch's modules whose functions take
    ``group=group.WORLD`` as a default argument.

    A default is evaluated once, at import: imported after ``init_process_group`` (DDP
    and FSDP import ``torch.distributed.nn`` on first use, through ``torch._dynamo``),
    those functions keep the group in their defaults, ``destroy_process_group`` cannot
    end it, and gloo's threads run on until the interpreter's shutdown frees the
    functions. Imported first, the defaults hold ``None``.
    """
    import torch.distributed.nn  # noqa: F401


def stack_blocks(model: nn.Module) -> list[nn.Module]:
    """The blocks of every stack in ``model`` (the modules of a stack's block lists),
    each once (a stack that shares weights repeats one block)."""
    blocks: dict[int, nn.Module] = {}
    for stack in model.modules():
        if not hasattr(stack, "checkpoint_activations"):
            continue
        for child in stack.children():
            if isinstance(child, nn.ModuleList):
                for block in child:
                    blocks.setdefault(id(block), block)
    return list(blocks.values())


def _parameter_names(model: nn.Module, optimizer: torch.optim.Optimizer) -> list[str]:
    """The names of the optimizer's parameters in the order of its ``state_dict``."""
    names = {id(param): name for name, param in model.named_parameters()}
    return [names[id(param)] for group in optimizer.param_groups for param in group["params"]]


def _indexed(by_name: Mapping[str, Any], names: list[str]) -> dict[str, Any]:
    """An optimizer state dict keyed by parameter name → by index, as
    ``optimizer.state_dict()`` of one process keys it."""
    index = {name: i for i, name in enumerate(names)}
    groups = [
        {**group, "params": [index[name] for name in group["params"]]}
        for group in by_name["param_groups"]
    ]
    state = {index[name]: value for name, value in by_name["state"].items()}
    return {"state": state, "param_groups": groups}


def _named(indexed: Mapping[str, Any], names: list[str]) -> dict[str, Any]:
    """The inverse of :func:`_indexed`."""
    groups = [
        {**group, "params": [names[i] for i in group["params"]]}
        for group in indexed["param_groups"]
    ]
    state = {names[int(i)]: value for i, value in indexed["state"].items()}
    return {"state": state, "param_groups": groups}


# ---------------------------------------------------------------------- launching


def inside_torchrun(environ: Mapping[str, str] | None = None) -> bool:
    """Whether this process is a rank torchrun started."""
    environ = os.environ if environ is None else environ
    return "TORCHELASTIC_RUN_ID" in environ or int(environ.get("WORLD_SIZE", "1")) > 1


def stop_with_launcher() -> None:
    """Have Linux send this torchrun rank SIGTERM when its launcher (the parent) dies:
    torchrun gives each rank a session of its own, so a launcher killed outright took none
    with it and they trained on beside a resumed run. On SIGTERM a rank stops as on Ctrl-C
    (every rank after the same step, the first saving ``last``)."""
    if not sys.platform.startswith("linux") or not inside_torchrun():
        return
    parent = os.getppid()
    ctypes.CDLL(None).prctl(1, signal.SIGTERM)  # 1: PR_SET_PDEATHSIG
    if os.getppid() != parent:  # the launcher died before the request
        os.kill(os.getpid(), signal.SIGTERM)


def launch(nproc: int, arguments: Sequence[str]) -> int:
    """Run ``selfattn train ARGUMENTS`` on ``nproc`` processes of this machine with
    torchrun (:mod:`selfattn.train.torchrun`: its report of a failed rank left out when
    the rank said why itself); returns the ranks' exit status (the caller checks
    :func:`inside_torchrun` and :func:`check_world_size` first)."""
    command = [
        sys.executable,
        "-m",
        "selfattn.train.torchrun",
        "--standalone",
        "--nproc_per_node",
        str(nproc),
        "-m",
        "selfattn",
        "train",
        *arguments,
    ]
    environ: MutableMapping[str, str] = dict(os.environ)
    environ.setdefault("OMP_NUM_THREADS", "1")
    return subprocess.call(command, env=environ)
