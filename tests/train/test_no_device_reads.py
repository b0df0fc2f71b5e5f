"""A training step queues its work and goes on: nothing in one step of one process reads a
value back from the device (which would make the host wait for the GPU), so the host can
queue the next step while the GPU runs this one.

On the CPU every value is at hand, so the CPU tests check the code that would read: the
training loop and the task objectives call no tensor → Python conversion inside a step
(the CPU-only shortcuts of the attention code are theirs to keep). On a GPU (marked
``gpu``) PyTorch's own sync detector is set to fail on any read in a step.
"""

from __future__ import annotations

import contextlib
import json
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

from selfattn.datatypes import Batch, moved
from selfattn.train import loop
from selfattn.train.loop import Trainer

from ..cli.test_cli_seq2seq import _config
from ..tiny_runs import train_config, write_reviews, write_tiny_config
from .test_amp import needs_cuda  # the gpu tests' one skip: CI has no GPU

#: The packages whose code runs a step's bookkeeping and losses.
WATCHED = ("selfattn/train/", "selfattn/tasks/")
CONVERSIONS = ("__bool__", "__int__", "__float__", "item", "tolist", "__index__", "numpy")


@contextlib.contextmanager
def recorded_reads(sites: list[str]) -> Iterator[None]:
    """Within: every tensor → Python conversion that WATCHED code calls itself goes to
    ``sites`` (PyTorch's optimizers read their CPU step counters: no device there)."""
    originals = {name: getattr(torch.Tensor, name) for name in CONVERSIONS}

    def watching(name: str) -> Any:
        original = originals[name]

        def convert(self: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
            caller = traceback.extract_stack(limit=2)[0]  # the line that converts
            if any(part in caller.filename for part in WATCHED):
                sites.append(f"{caller.filename}:{caller.lineno} {caller.line}")
            return original(self, *args, **kwargs)

        return convert

    try:
        for name in CONVERSIONS:
            setattr(torch.Tensor, name, watching(name))
        yield
    finally:
        for name, original in originals.items():
            setattr(torch.Tensor, name, original)


@pytest.fixture
def step_reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The reads made inside ``Trainer._step`` (forward, loss, backward, optimizer)."""
    sites: list[str] = []
    step = Trainer._step

    def watched_step(self: Trainer, *args: Any) -> Any:
        with recorded_reads(sites):
            return step(self, *args)

    monkeypatch.setattr(Trainer, "_step", watched_step)
    return sites


def _metrics(run_dir: Path) -> list[dict[str, Any]]:
    """The run's metrics lines without the timings."""
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    return [
        {key: value for key, value in json.loads(line).items() if key not in loop.TIMING_KEYS}
        for line in lines
    ]


def test_a_seq2seq_step_with_nat_reads_nothing_back(tmp_path: Path, step_reads: list[str]) -> None:
    config = _config(tmp_path, tmp_path / "run", epochs=1)
    assert train_config(config, tmp_path / "run") == 0
    assert not step_reads, step_reads


def test_a_token_step_reads_nothing_back(tmp_path: Path, step_reads: list[str]) -> None:
    config = write_tiny_config(tmp_path, write_reviews(tmp_path / "train.csv", 40))
    assert train_config(config, tmp_path / "run") == 0
    assert not step_reads, step_reads


def test_off_the_cpu_the_loss_is_read_rarely_and_the_metrics_are_the_same(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where a read waits for the device, the running loss is read at most every
    LOSS_SECONDS (here: only at an epoch's first step) and before saves and the epoch's
    end; the metrics are those of a run that reads it every step."""
    config = write_tiny_config(tmp_path, write_reviews(tmp_path / "train.csv", 63), epochs=2)
    settings = ("train.checkpoint_every=3",)  # mid-epoch saves read it too
    assert train_config(config, tmp_path / "every", *settings) == 0
    monkeypatch.setattr(loop, "_reads_are_free", lambda device: False)
    monkeypatch.setattr(loop, "LOSS_SECONDS", float("inf"))
    reads: list[str] = []
    with recorded_reads(reads):
        assert train_config(config, tmp_path / "rarely", *settings) == 0
    loss_reads = [site for site in reads if "float(self.loss_sum)" in site]
    # 2 epochs of 4 steps: each epoch's first step, its mid-epoch save (steps 3 and 6 of
    # the run) and its end: 6 reads, not 8 and more.
    assert len(loss_reads) == 6, reads
    assert _metrics(tmp_path / "rarely") == _metrics(tmp_path / "every")


def test_moving_a_batch_without_blocking_off_cuda_is_a_plain_move() -> None:
    padding = torch.tensor([[False, True]])
    batch = Batch(torch.tensor([[4, 5]]), None, None, padding, torch.tensor([1]))
    assert torch.equal(batch.to("cpu", non_blocking=True).token_ids, batch.token_ids)
    assert not moved(torch.ones(2), "cpu", non_blocking=True).is_pinned()


@pytest.mark.gpu
@needs_cuda
def test_moved_stages_in_pinned_memory_and_copies_the_values() -> None:
    source = torch.arange(1000)
    torch.cuda.set_sync_debug_mode("error")
    try:
        out = moved(source, "cuda", non_blocking=True)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    assert torch.equal(out.cpu(), source)


@pytest.mark.gpu
@needs_cuda
def test_a_cuda_seq2seq_step_never_waits_for_the_gpu(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    step = Trainer._step

    def strict_step(self: Trainer, *args: Any) -> Any:
        torch.cuda.set_sync_debug_mode("error")  # any read back raises
        try:
            return step(self, *args)
        finally:
            torch.cuda.set_sync_debug_mode("default")

    monkeypatch.setattr(Trainer, "_step", strict_step)
    config = _config(tmp_path, tmp_path / "run", epochs=2)
    assert train_config(config, tmp_path / "run", "train.device=cuda") == 0
