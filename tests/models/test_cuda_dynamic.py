"""Dynamic computation on a GPU (marked ``gpu``; CI has none): early exit drops rows and
adaptive depth freezes halted positions by data-dependent indexing, which must give on
CUDA what it gives on the CPU from the same weights."""

from __future__ import annotations

import copy
from dataclasses import replace

import pytest
import torch

from selfattn.datatypes import Batch

from ..models.test_act import _act, _inputs, _stack
from .test_early_exit import CASES, IDS, _batch, _model

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]


@pytest.mark.parametrize(("task", "config"), CASES, ids=IDS)
@pytest.mark.parametrize("threshold", [0.6, 0.9])
def test_early_exit_on_cuda_exits_where_the_cpu_exits(task: str, config, threshold: float) -> None:
    cpu = _model(task, replace(config, dropout=0.0)).double()
    gpu = copy.deepcopy(cpu).cuda()
    batch: Batch = _batch(task)
    with torch.no_grad():
        on_cpu = cpu.early_exit(batch, threshold)
        on_gpu = gpu.early_exit(batch.to("cuda"), threshold)
    assert on_gpu.layers.cpu().tolist() == on_cpu.layers.tolist()
    torch.testing.assert_close(on_gpu.logits.cpu(), on_cpu.logits, atol=1e-9, rtol=0)


def test_adaptive_depth_on_cuda_halts_where_the_cpu_halts() -> None:
    act = _act(_stack(), scale=1.0)
    x, padding = _inputs()
    with torch.no_grad():
        on_cpu = act(x, key_padding_mask=padding)
        gpu = copy.deepcopy(act).cuda()
        on_gpu = gpu(x.cuda(), key_padding_mask=padding.cuda())
    real = ~padding
    assert on_cpu.ponder is not None and on_gpu.ponder is not None
    assert torch.equal(on_gpu.ponder.steps.cpu(), on_cpu.ponder.steps)
    assert len(set(on_cpu.ponder.steps[real].tolist())) > 1  # positions halt apart
    torch.testing.assert_close(
        on_gpu.last_hidden_state.cpu()[real], on_cpu.last_hidden_state[real], atol=1e-9, rtol=0
    )
