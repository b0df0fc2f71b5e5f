"""What the training loop carries from step to step: the objects it trains (:class:`Parts`)
and its counters (:class:`LoopState`), which every checkpoint stores.

:class:`LoopState` is written into a checkpoint's manifest by :meth:`LoopState.to_dict` and
read back by :meth:`LoopState.from_dict`, which also reads the unversioned dicts that
earlier selfattn versions stored (the same keys, some of them missing in older runs), and
refuses anything else in one line naming the key.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from typing import Any, ClassVar, get_args, get_type_hints

import torch

#: Keys stored only when not 0 (the skips of ``train.nan_policy = "skip"``), so that a run
#: that skipped nothing stores what earlier selfattn versions read.
_ONLY_WHEN_SET = ("skipped", "skipped_in_a_row")
#: Keys a stored state may lack, which then hold their defaults: the sums of the epoch in
#: progress (stored since saves within epochs), the thread count (stored since resumed runs
#: keep it) and the process count (unversioned states store it only when above one).
_MAY_BE_MISSING = frozenset(
    ("threads", "batch", "loss_sum", "units", "tokens", "train_seconds", "world_size")
) | frozenset(_ONLY_WHEN_SET)


@dataclass
class Parts:
    """What one run trains and steps, and the RNG state its current epoch began with.

    Attributes:
        model: the model (unwrapped; ``loss`` goes through DDP / FSDP).
        optimizer: its optimizer.
        scheduler: the learning-rate schedule.
        scaler: the float16 loss scaler, or ``None``.
        loss: ``(batch, step) → loss``.
        epoch_rng: :func:`~selfattn.train.rng.get_rng_state` when the current epoch began.
    """

    model: torch.nn.Module
    optimizer: torch.optim.Optimizer
    scheduler: torch.optim.lr_scheduler.LambdaLR
    scaler: torch.amp.GradScaler | None
    loss: Callable[[Any, int], torch.Tensor]
    epoch_rng: dict[str, Any] | None = None


@dataclass(kw_only=True)
class LoopState:
    """The loop's counters: where the run stands, its best epoch, the running sums of the
    epoch in progress.

    Attributes:
        epoch: epochs finished.
        step: optimizer steps taken in the whole run.
        steps_per_epoch: batches in an epoch.
        best_score: the best epoch's score (see
            :func:`~selfattn.train.stop_rules.selection_score`), ``None`` before the first
            epoch's end.
        best_epoch: that epoch (1-based), or ``None``.
        bad_epochs: epochs since the best one, for ``train.patience``.
        stopped_early: ``train.patience`` ended the run.
        threads: torch's thread count when the run started (``None`` in runs older
            than that field); a resumed run keeps it.
        batch: batches done in the epoch in progress.
        loss_sum: that epoch's summed loss (``loss · units`` per step).
        units: that epoch's units (tokens, sequences, … what the loss averages over).
        tokens: that epoch's tokens.
        train_seconds: that epoch's training time so far (evaluation excluded).
        world_size: processes that trained the run.
        skipped: that epoch's steps skipped for a loss that is not finite
            (``train.nan_policy = "skip"``).
        skipped_in_a_row: the steps skipped since the last one that was not.
    """

    #: Stored with the state; raised when a field is added, removed or changes meaning
    #: (the skip counts are not: stored only when not 0, they leave a state that an
    #: earlier selfattn reads unless steps were skipped, which it would refuse in one line).
    version: ClassVar[int] = 1

    epoch: int = 0
    step: int = 0
    steps_per_epoch: int
    best_score: float | None = None
    best_epoch: int | None = None
    bad_epochs: int = 0
    stopped_early: bool = False
    threads: int | None = None
    batch: int = 0
    loss_sum: float = 0.0
    units: int = 0
    tokens: int = 0
    train_seconds: float = 0.0
    world_size: int = 1
    skipped: int = 0
    skipped_in_a_row: int = 0

    def start_epoch(self) -> None:
        """Clear the running sums at an epoch's end, for the next one."""
        self.batch, self.loss_sum, self.units, self.tokens = 0, 0.0, 0, 0
        self.train_seconds, self.skipped = 0.0, 0

    def position(self) -> str:
        """Where the loop stands: ``epoch 2, step 137 of 400``."""
        return f"epoch {self.epoch + 1}, step {self.batch} of {self.steps_per_epoch}"

    def to_dict(self) -> dict[str, Any]:
        """JSON values for a checkpoint's manifest, with the format's ``version``."""
        return {"version": self.version} | {
            field.name: getattr(self, field.name)
            for field in fields(self)
            if field.name not in _ONLY_WHEN_SET or getattr(self, field.name)
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], source: str = "checkpoint") -> LoopState:
        """The state :meth:`to_dict` (or an earlier selfattn, without ``version``) stored.

        Args:
            data: the stored dict.
            source: what it was read from, for the error message.

        Raises:
            ValueError: one line naming ``source`` and the problem: another version, a
                missing, unknown or ill-typed key.
        """
        if not isinstance(data, Mapping):
            raise ValueError(f"{source}: the loop state is not a JSON object")
        version = data.get("version", 1)  # unversioned dicts are this layout's first form
        if version != cls.version:
            raise ValueError(
                f"{source}: loop state version {version!r}; this selfattn reads version "
                f"{cls.version}"
            )
        known = [field.name for field in fields(cls)]
        unknown = sorted(set(data) - set(known) - {"version"})
        if unknown:
            raise ValueError(f"{source}: unknown loop state key {unknown[0]!r}")
        values: dict[str, Any] = {}
        for name in known:
            if name in data:
                values[name] = _typed(name, data[name], source)
            elif name not in _MAY_BE_MISSING:
                raise ValueError(f"{source}: the loop state lacks key {name!r}")
        return cls(**values)


def _typed(name: str, value: Any, source: str) -> Any:
    """``value`` as field ``name`` holds it (read from its annotation), or a one-line
    ValueError."""
    hint = get_type_hints(LoopState)[name]
    kinds = get_args(hint) or (hint,)
    if value is None and type(None) in kinds:
        return None
    kind = next(kind for kind in kinds if kind is not type(None))
    # bool is an int in Python, and no count or score is a bool; JSON may write a float
    # such as 0.0 as 0, so a float field takes an int too (and holds it as a float)
    if isinstance(value, bool) == (kind is bool) and isinstance(value, kind):
        return value
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    wanted = f"{kind.__name__} or null" if type(None) in kinds else kind.__name__
    raise ValueError(
        f"{source}: loop state key {name!r} holds {value!r} ({type(value).__name__}), not {wanted}"
    )
