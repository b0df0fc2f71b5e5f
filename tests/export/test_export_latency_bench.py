"""benchmarks/export_latency.py on a tiny trained run: wall-clock and CPU ratios, int8's
scores, ONNX Runtime's profile, and everything in the last line's JSON."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch

from ..helpers_scripts import load_script
from .conftest import RunMaker

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.mark.slow
def test_int8_profile_and_json_line(
    capsys: pytest.CaptureFixture[str], trained: RunMaker, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = trained("reviews")
    script = load_script("benchmarks/export_latency.py")
    timed, calls = script.timed, []

    def spy(function: Any, inputs: tuple[Any, ...]) -> tuple[float, float]:
        calls.append(function)
        return timed(function, inputs)

    monkeypatch.setattr(script, "timed", spy)
    threads = torch.get_num_threads()
    try:
        script.main([str(run), "--int8", "--profile", "--repeats", "3", "--batches", "2"])
    finally:
        torch.set_num_threads(threads)
    # Three sides (eager, float32, int8), three rounds: each round starts one side later,
    # so each side runs first once.
    rounds = [calls[i : i + 3] for i in range(0, 9, 3)]
    assert len(calls) == 9 and rounds[1] == rounds[0][1:] + rounds[0][:1]
    assert len({id(r[0]) for r in rounds}) == 3
    lines = capsys.readouterr().out.splitlines()
    assert sum(line.endswith("(wall)") for line in lines) == 1
    assert sum(line.endswith("(cpu)") for line in lines) == 1
    assert any("int8 ÷ float32 ≥" in line for line in lines)
    found = json.loads(lines[-1])
    assert found["threads"] == 1 and found["repeats"] == 3
    numbers = found[Path(run).name]
    batch = numbers["batch2"]
    assert batch["tokens"] >= 2
    for clock in ("wall", "cpu"):
        assert batch[clock]["int8_ms"] > 0 and batch[clock]["int8_over_float32"] > 0
        assert batch[clock]["onnx_over_eager"] == pytest.approx(
            batch[clock]["onnx_ms"] / batch[clock]["eager_ms"]
        )
    profile = batch["profile"]
    for side in ("float32", "int8"):
        assert 0 < profile[side]["weight_share"] < 1
        assert sum(profile[side]["ops_ms"].values()) == pytest.approx(profile[side]["kernel_ms"])
    # int8's own products are timed in int8, and none of them in float32.
    assert "DynamicQuantizeMatMul" in profile["int8"]["ops_ms"] or (
        "MatMulIntegerToFloat" in profile["int8"]["ops_ms"]
    )
    assert "DynamicQuantizeLinear" not in profile["float32"]["ops_ms"]
    assert numbers["dev"]["metric"] == "accuracy"
    assert 0 <= numbers["dev"]["int8"] <= 1 and 0 <= numbers["dev"]["float32"] <= 1
