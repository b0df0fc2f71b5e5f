"""``train.tf32``: float32 matrix products on TF32 tensor cores while training on CUDA, and
nothing anywhere else (on the CPU the option is ignored with a warning).

The CUDA test is marked ``gpu`` (CI has none; ``pytest -m gpu`` on a machine with one).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from selfattn.train import loop
from selfattn.train.precision import tensor_float32

from .test_amp import needs_cuda, train
from .test_distributed import write_run


@pytest.fixture(autouse=True)
def keep_precision() -> Iterator[None]:
    before = torch.get_float32_matmul_precision()
    yield
    torch.set_float32_matmul_precision(before)


def test_tf32_on_cuda_inside_and_the_previous_setting_after() -> None:
    torch.set_float32_matmul_precision("medium")
    with tensor_float32("cuda", True):
        assert torch.get_float32_matmul_precision() == "high"
        assert torch.backends.cuda.matmul.allow_tf32
    assert torch.get_float32_matmul_precision() == "medium"
    torch.set_float32_matmul_precision("highest")
    with pytest.raises(KeyError), tensor_float32(torch.device("cuda", 0), True):
        raise KeyError("stopped")
    assert torch.get_float32_matmul_precision() == "highest"
    assert not torch.backends.cuda.matmul.allow_tf32


@pytest.mark.parametrize(("device", "enabled"), [("cpu", True), ("cuda", False)])
def test_no_change_off_cuda_or_when_not_asked(device: str, enabled: bool) -> None:
    with tensor_float32(device, enabled):
        assert torch.get_float32_matmul_precision() == "highest"


def test_the_whole_run_is_inside_the_setting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    entered: list[tuple[torch.device, bool]] = []

    @contextlib.contextmanager
    def recorded(device: torch.device, enabled: bool) -> Iterator[None]:
        entered.append((device, enabled))
        yield

    monkeypatch.setattr(loop, "tensor_float32", recorded)
    config = write_run(tmp_path)
    with pytest.warns(UserWarning, match="train.tf32 is only used on CUDA"):
        train(config, tmp_path / "tf32", "train.tf32=true")
    train(config, tmp_path / "plain")
    assert entered == [(torch.device("cpu"), True), (torch.device("cpu"), False)]


def test_tf32_on_the_cpu_warns_and_trains_in_float32(tmp_path: Path) -> None:
    config = write_run(tmp_path)
    plain = train(config, tmp_path / "fp32")
    with pytest.warns(UserWarning, match="train.tf32 is only used on CUDA"):
        tf32 = train(config, tmp_path / "tf32", "train.tf32=true")
    assert tf32 == plain  # bit for bit


@pytest.mark.gpu
@needs_cuda
def test_tf32_on_cuda_trains_close_to_float32(tmp_path: Path) -> None:
    config = write_run(tmp_path, epochs=3)
    reference = train(config, tmp_path / "fp32", "train.device=cuda")
    tf32 = train(config, tmp_path / "tf32", "train.device=cuda", "train.tf32=true")
    assert tf32[-1] < tf32[0]  # it learns
    torch.testing.assert_close(torch.tensor(tf32), torch.tensor(reference), rtol=0.02, atol=0.01)
    assert torch.get_float32_matmul_precision() == "highest"  # given back after the run
