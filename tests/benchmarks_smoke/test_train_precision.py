"""benchmarks/train_precision.py runs on the CPU (float32 alone) and refuses the GPU modes
there in one line."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest

from ..cli.test_cli_seq2seq import _config
from ..helpers_scripts import load_script


def load() -> ModuleType:
    return load_script("benchmarks/train_precision.py")


def test_float32_on_the_cpu(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = str(_config(tmp_path, tmp_path / "run", epochs=1))
    flags = ["--device", "cpu", "--steps", "2", "--warmup", "1", "--repeats", "2", "--dev", "8"]
    load().main(["--config", config, *flags])  # tests/conftest.py puts the threads back
    out = capsys.readouterr().out.splitlines()
    row = next(line.split() for line in out if line.startswith("float32"))
    assert float(row[1].replace(",", "")) > 0 and row[2] == "1.00"
    assert out[-1] == "fastest: float32"


def test_gpu_modes_are_refused_on_the_cpu(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = str(_config(tmp_path, tmp_path / "run", epochs=1))
    with pytest.raises(SystemExit) as stopped:
        load().main(["--config", config, "--device", "cpu", "--modes", "float32", "bf16"])
    assert stopped.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert "TF32 and bf16 are CUDA modes" in err
