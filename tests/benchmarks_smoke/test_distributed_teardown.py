"""benchmarks/distributed_teardown.py, its minimal job once: two ranks join, train, close
and exit 0, and on neither does the process group outlive ``Distributed.close()``."""

from __future__ import annotations

from pathlib import Path

import pytest

from ..helpers_scripts import load_script


@pytest.mark.slow
def test_minimal_job_ends_its_group_in_close(capsys: pytest.CaptureFixture[str]) -> None:
    status = load_script("benchmarks/distributed_teardown.py").main(
        ["--what", "minimal", "--runs", "1", "--timeout", "120"]
    )
    out = capsys.readouterr().out.splitlines()
    assert status == 0, out
    assert out[-1] == "aborts: 0 / 1"
    ranks = 2 if Path("/proc/self/task").is_dir() else 0
    assert f"group outlived close() on 0 of {ranks} ranks" in out
