"""benchmarks/lra.py: the table's rows end as one JSON line (what records.py reads) that
agrees with the table, read from saved rows (nothing trains)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ..helpers_scripts import load_script


def test_the_report_ends_with_its_rows_as_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = [
        {
            "task": "listops",
            "variant": "dense",
            "accuracy": 0.36,
            "steps": 10,
            "steps_per_s": 2.0,
            "step_peak_bytes": 8 * 2**20,
            "epochs": 1,
        },
        {
            "task": "listops",
            "variant": "window",
            "accuracy": 0.30,
            "steps": 10,
            "steps_per_s": 3.0,
            "step_peak_bytes": 2 * 2**20,
            "epochs": 1,
        },
        {
            "task": "text",
            "variant": "linear",
            "accuracy": 0.6,
            "steps": 10,
            "steps_per_s": 1.0,
            "step_peak_bytes": 2**20,
            "epochs": 1,
        },
    ]
    (tmp_path / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    script = load_script("benchmarks/lra.py")
    argv = ["--report", "--out", str(tmp_path), "--tasks", "listops,text"]
    script.main([*argv, "--variants", "window,linear"])
    out = capsys.readouterr().out.strip().splitlines()
    found = json.loads(out[-1])
    assert list(found) == ["listops.dense", "listops.window", "text.linear"]
    assert found["listops.window"]["accuracy"] == 0.30
    assert found["listops.window"]["speed_vs_dense"] == pytest.approx(1.5)
    assert found["listops.window"]["memory_vs_dense"] == pytest.approx(0.25)
    assert found["listops.window"]["step_mib"] == pytest.approx(2.0)
    assert set(found["text.linear"]) == {"accuracy", "steps_per_s", "step_mib"}  # no dense row
    window = next(line for line in out if line.startswith("listops  window"))
    assert "30.00" in window and "1.50" in window and "0.25" in window
