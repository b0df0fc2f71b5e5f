"""Mixed precision (``train.amp``): bf16 autocast on CUDA, fp16 with a loss scaler where bf16
is missing, and float32 on the CPU (the option is ignored there, with a warning).

The CUDA tests are marked ``gpu`` (CI has none; ``pytest -m gpu`` on a machine with one).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from selfattn.train.checkpoint import load_checkpoint

from ..helpers_cli import set_flags
from .test_distributed import run_cli, write_run

needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


def all_float32(state: dict[str, torch.Tensor]) -> bool:
    return all(t.dtype == torch.float32 for t in state.values() if t.is_floating_point())


def train(config: Path, run_dir: Path, *settings: str, resume: bool = False) -> list[float]:
    """Train ``config`` into ``run_dir`` with ``--set`` ``settings``; the epochs' losses."""
    args = ["train", str(config), "--no-progress", "--set", f"run_dir={run_dir}"]
    args += ["--resume"] if resume else []
    args += set_flags(*settings)
    assert run_cli(*args) == 0
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    return [json.loads(line)["train_loss"] for line in lines]


def test_amp_on_the_cpu_warns_and_trains_in_float32(tmp_path: Path) -> None:
    config = write_run(tmp_path)
    plain = train(config, tmp_path / "fp32")
    with pytest.warns(UserWarning, match="train.amp is only used on CUDA"):
        amp = train(config, tmp_path / "amp", "train.amp=true")
    assert amp == plain  # bit for bit: nothing ran in lower precision
    state = load_checkpoint(tmp_path / "amp" / "last")
    assert state.scaler_state is None
    assert all_float32(state.model_state)
    with pytest.warns(UserWarning, match="train.amp is only used on CUDA"):
        more = train(config, tmp_path / "amp", "train.amp=true", "train.epochs=3", resume=True)
    assert len(more) == 3 and more[:2] == amp


@pytest.mark.gpu
@needs_cuda
@pytest.mark.parametrize("bf16", [True, False], ids=["bf16", "fp16-scaler"])
def test_amp_on_cuda_trains_close_to_float32_and_resumes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, bf16: bool
) -> None:
    if bf16 and not torch.cuda.is_bf16_supported():
        pytest.skip("this GPU has no bf16")
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: bf16)
    config = write_run(tmp_path, epochs=3)
    reference = train(config, tmp_path / "fp32", "train.device=cuda")
    amp = train(config, tmp_path / "amp", "train.device=cuda", "train.amp=true")
    assert all(torch.isfinite(torch.tensor(amp)))
    assert amp[-1] < amp[0]  # it learns
    # Lower precision moves the losses a little, never by much on a model this small.
    torch.testing.assert_close(torch.tensor(amp), torch.tensor(reference), rtol=0.05, atol=0.02)
    state = load_checkpoint(tmp_path / "amp" / "last")
    # Autocast keeps the master weights in float32; fp16 keeps its scaler for --resume.
    assert all_float32(state.model_state)
    assert (state.scaler_state is None) == bf16
    if not bf16:
        assert state.scaler_state is not None and state.scaler_state["scale"] > 0
    settings = ("train.device=cuda", "train.amp=true", "train.epochs=4")
    more = train(config, tmp_path / "amp", *settings, resume=True)
    assert len(more) == 4 and more[:3] == amp


@pytest.mark.gpu
@needs_cuda
def test_amp_attention_runs_the_fused_kernel_in_bf16() -> None:
    from selfattn.attention.multihead import MultiHeadAttention

    if not torch.cuda.is_bf16_supported():
        pytest.skip("this GPU has no bf16")
    attention = MultiHeadAttention(64, 4).cuda()
    x = torch.randn(2, 50, 64, device="cuda")
    with torch.autocast("cuda", dtype=torch.bfloat16):
        out = attention(x, x, x)[0]
    assert out.dtype == torch.bfloat16
    reference = attention(x, x, x)[0]
    torch.testing.assert_close(out.float(), reference, rtol=0.05, atol=0.05)
