"""When the training loop saves, and what: ``last`` within an epoch every
``train.checkpoint_every`` steps (or every :data:`CHECKPOINT_SECONDS`), and at every epoch's
end ``last``, ``best`` when the epoch is the best so far, and ``epoch-E`` for the last
``train.keep_epochs`` epochs. Weights that are not finite are never saved: the run stops
instead (:class:`~selfattn.train.nan_guard.NotFinite`), and ``last`` keeps the latest
checkpoint whose weights were.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch import nn

from selfattn.config import Config
from selfattn.train.checkpoint import save_checkpoint
from selfattn.train.distributed import Distributed
from selfattn.train.loop_state import LoopState, Parts
from selfattn.train.nan_guard import NotFinite, not_finite_message
from selfattn.train.run_dir import epoch_checkpoint, prune_epoch_checkpoints

#: ``train.checkpoint_every = None``: save ``last`` after this many seconds of training.
CHECKPOINT_SECONDS = 120.0


def mid_epoch_save_due(state: LoopState, every: int | None, since_save: float) -> bool:
    """Whether ``train.checkpoint_every`` (``every``) asks for a save of ``last`` now,
    ``since_save`` seconds after the previous one (the epoch's end saves anyway)."""
    if state.batch >= state.steps_per_epoch:
        return False
    if every is None:
        return since_save >= CHECKPOINT_SECONDS
    return state.step % every == 0


def weights_are_finite(model: nn.Module) -> bool:
    """Whether every parameter and floating buffer this process holds (its shard, under
    FSDP) is finite; one read from the device."""
    tensors = [*model.parameters(), *(b for b in model.buffers() if b.is_floating_point())]
    flags = [torch.isfinite(getattr(t, "to_local", lambda t=t: t)()).all() for t in tensors]
    return bool(torch.stack(flags).all()) if flags else True


class Saves:
    """Writes one run's checkpoints (rank 0 writes; every rank gathers FSDP's shards).

    Args:
        run_dir: the run's folder.
        config: the run's configuration, stored in each checkpoint.
        vocabs: JSON-ready vocabularies, stored in each checkpoint.
        dist: the processes training the run.
        clock: the loop's clock (``time.monotonic``), which times the saves of ``last``.

    Attributes:
        saved: where the loop stood at the latest save of ``last`` (or when it was
            resumed from it), e.g. ``epoch 2, step 137 of 400``; ``None`` before.
        saved_at: ``clock()`` after that save (the loop sets it when its epochs begin).
    """

    def __init__(
        self,
        run_dir: Path,
        config: Config,
        vocabs: dict[str, Any],
        dist: Distributed,
        clock: Callable[[], float],
    ) -> None:
        self.run_dir = run_dir
        self.config = config
        self.vocabs = vocabs
        self.dist = dist
        self.clock = clock
        self.saved: str | None = None
        self.saved_at = 0.0

    def within_epoch(self, parts: Parts, state: LoopState) -> None:
        """``last/`` in the middle of an epoch, with what resuming there needs."""
        self._check_weights(parts, state)
        self._last(parts, state, epoch_rng=parts.epoch_rng)

    def epoch_end(self, parts: Parts, state: LoopState) -> None:
        """``epoch-E/`` when ``train.keep_epochs`` asks for it, ``best/`` when the epoch
        that ``state`` has just counted is the best so far, then ``last/``; then drops
        epoch checkpoints beyond the last N.

        ``epoch-E`` goes first: a crash before ``last`` re-runs epoch E, which writes it again.
        It keeps the weights only, for averaging (resuming reads ``last``).
        """
        self._check_weights(parts, state)
        keep = self.config.train.keep_epochs
        if keep:
            weights, _ = self.dist.states(parts.model, None)
            if self.dist.is_main():
                save_checkpoint(
                    epoch_checkpoint(self.run_dir, state.epoch),
                    weights,
                    None,
                    None,
                    state.to_dict(),
                    self.config,
                    self.vocabs,
                    spec=getattr(parts.model, "spec", None),
                )
        # A new best is this epoch's `last` too: one save, `best` linked to its files.
        self._last(parts, state, also_best=state.best_epoch == state.epoch)
        if self.dist.is_main():
            prune_epoch_checkpoints(self.run_dir, keep, state.epoch)

    def _check_weights(self, parts: Parts, state: LoopState) -> None:
        """Stop the run, every rank alike, when the weights to be saved are not finite."""
        (bad,) = self.dist.agree(not weights_are_finite(parts.model))
        if bad:
            where = f"after epoch {state.epoch}" if state.batch == 0 else f"at {state.position()}"
            message = not_finite_message(
                "the weights are not finite", where, self.saved, self.run_dir, self.config.train
            )
            raise NotFinite(message)

    def _last(
        self,
        parts: Parts,
        state: LoopState,
        epoch_rng: dict[str, Any] | None = None,
        also_best: bool = False,
    ) -> None:
        weights, optimizer = self.dist.states(parts.model, parts.optimizer)  # FSDP gathers
        if self.dist.is_main():
            save_checkpoint(
                self.run_dir / "last",
                weights,
                optimizer,
                parts.scheduler,
                state.to_dict(),
                self.config,
                self.vocabs,
                scaler=parts.scaler,
                epoch_rng_state=epoch_rng,
                spec=getattr(parts.model, "spec", None),
                also=[self.run_dir / "best"] if also_best else [],
            )
        self.saved = state.position()
        self.saved_at = self.clock()
