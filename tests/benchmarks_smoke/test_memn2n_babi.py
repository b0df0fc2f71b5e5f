"""benchmarks/memn2n_babi.py: the rows it prints as a table are printed again as one JSON
object on the last line (what tests/docs/records.py records), read here from runs saved
under --out so that nothing trains."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ..helpers_scripts import ROOT, load_script

SAVED = [
    {"hops": 1, "test_accuracy": 0.287, "support_hits": [0.18], "best_epoch": 12, "seconds": 113.4},
    {
        "hops": 2,
        "test_accuracy": 0.575,
        "support_hits": [0.65, 0.5625],
        "best_epoch": 88,
        "seconds": 127,
    },
]


def test_the_last_line_is_the_table_as_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for row in SAVED:
        folder = tmp_path / f"qa2-{row['hops']}hop"
        folder.mkdir()
        saved = {"recipe": "qa2", "epochs": 100, **row}
        (folder / "memn2n.json").write_text(json.dumps(saved), encoding="utf-8")
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    script = load_script("benchmarks/memn2n_babi.py")
    script.main(["--recipes", "qa2", "--hops", "1,2", "--out", str(tmp_path)])
    out = capsys.readouterr().out.strip().splitlines()
    assert json.loads(out[-1]) == {
        "qa2-1hop": {
            "test_accuracy": 0.287,
            "support_hits": {"1": 0.18},
            "best_epoch": 12,
            "epochs": 100,
            "seconds": 113.4,
        },
        "qa2-2hop": {
            "test_accuracy": 0.575,
            "support_hits": {"1": 0.65, "2": 0.5625},
            "best_epoch": 88,
            "epochs": 100,
            "seconds": 127,
        },
    }
    assert "| `qa2` | 2 | 0.575 | 0.65 / 0.56 | 88 of 100 | 127 |" in out
