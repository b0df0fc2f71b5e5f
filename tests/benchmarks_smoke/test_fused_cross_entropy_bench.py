"""benchmarks/fused_cross_entropy.py at a tiny size: one row per vocabulary, and the two
settings' first losses agree."""

from __future__ import annotations

import pytest
import torch

from ..helpers_scripts import load_script


@pytest.mark.slow
def test_one_row_per_vocabulary(capsys: pytest.CaptureFixture[str]) -> None:
    script = load_script("benchmarks/fused_cross_entropy.py")
    threads = torch.get_num_threads()
    try:  # the script runs on one thread
        script.main(["--vocab", "40", "--batch", "2", "--target-len", "4", "--steps", "1"])
    finally:
        torch.set_num_threads(threads)
    lines = capsys.readouterr().out.splitlines()
    assert "1 thread" in lines[0] and "time ÷" in lines[1]
    vocab, *numbers = lines[2].split()
    assert vocab == "40" and len(numbers) == 7
    assert float(numbers[-1]) < 1e-5  # |Δ loss|
