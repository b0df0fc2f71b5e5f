"""SDPA's backends while selfattn trains or decodes: no cuDNN attention on CUDA (it builds
a plan for every new shape, and bucketed batches change shape nearly every step)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from selfattn.attention import backends
from selfattn.attention.backends import varying_shapes
from selfattn.tasks import Predictor

from ..conftest import BackendChoice

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "checkpoints_v1"


def _flags() -> tuple[bool, bool, bool, bool]:
    cuda = torch.backends.cuda
    return (
        cuda.cudnn_sdp_enabled(),
        cuda.flash_sdp_enabled(),
        cuda.mem_efficient_sdp_enabled(),
        cuda.math_sdp_enabled(),
    )


def test_on_cuda_every_backend_but_cudnn_stays_and_all_come_back() -> None:
    before = _flags()
    assert before == (True, True, True, True)  # PyTorch's default
    with varying_shapes("cuda"):
        assert _flags() == (False, True, True, True)
    assert _flags() == before
    with pytest.raises(RuntimeError), varying_shapes(torch.device("cuda", 0)):
        raise RuntimeError("a failed step")
    assert _flags() == before


def test_off_cuda_nothing_changes() -> None:
    before = _flags()
    with varying_shapes("cpu"):
        assert _flags() == before
        q = torch.randn(2, 2, 5, 8)
        torch.testing.assert_close(
            torch.nn.functional.scaled_dot_product_attention(q, q, q),
            torch.softmax(q @ q.transpose(-1, -2) / 8**0.5, -1) @ q,
        )


def test_the_predictor_decodes_within_it_on_its_models_device(
    monkeypatch: pytest.MonkeyPatch, backend_choice: BackendChoice
) -> None:
    backend_choice.watch("selfattn.tasks.predictor.varying_shapes")
    predictor = Predictor(FIXTURES / "seq2seq")
    decode = predictor.task.decode  # type: ignore[attr-defined]
    seen: list[bool] = []

    def watched(*args: object, **kwargs: object) -> object:
        seen.append(backend_choice.inside)
        return decode(*args, **kwargs)

    monkeypatch.setattr(predictor.task, "decode", watched)
    predictor.predict(predictor.example("a b c"), method="greedy")
    assert backend_choice.entered == [torch.device("cpu")] and seen == [True]
    assert not backend_choice.inside
    assert backends.VARYING_SHAPE_BACKENDS[-1] == torch.nn.attention.SDPBackend.MATH
