"""benchmarks/translation_scores.py: two tiny reversal runs (two seeds) scored side by side (each
decoding its own `selfattn eval` process), the table and the JSON line agreeing with
`selfattn eval` and with each run's metrics.jsonl; a folder that is not a run refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from selfattn.cli.main import main

from ..cli.test_cli_seq2seq import TRAIN, reversal_data
from ..helpers_cli import TINY_MODEL, write_config
from ..helpers_scripts import load_script


def _run(tmp_path: Path, name: str, seed: int, keep_epochs: int = 0) -> Path:
    run_dir = tmp_path / name
    config = write_config(
        tmp_path / f"{name}.toml",
        run_dir=run_dir,
        data=reversal_data(tmp_path, 120, 12),
        model={**TINY_MODEL, "embed_dim": 16, "ffn_dim": 32},
        train={**TRAIN, "epochs": 2, "seed": seed, "keep_epochs": keep_epochs},
    )
    assert main(["train", str(config), "--no-progress"]) == 0
    return run_dir


@pytest.mark.slow
def test_two_runs_scored_side_by_side(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    runs = {"seed0": _run(tmp_path, "a", 0), "seed1": _run(tmp_path, "b", 1)}
    capsys.readouterr()
    script = load_script("benchmarks/translation_scores.py")
    argv = [f"{name}={run}" for name, run in runs.items()]
    assert script.main([*argv, "--decodings", "greedy,beam2", "--jobs", "2"]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    results = json.loads(out[-1])
    assert set(results) == {"seed0", "seed1"}
    for name, run in runs.items():
        epochs = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
        assert results[name]["steps"] == epochs[-1]["step"]
        assert results[name]["dev_accuracy"] == max(e["dev_accuracy"] for e in epochs)
        assert main(["eval", str(run), "--split", "test", "--beam", "2", "--threads", "1"]) == 0
        alone = json.loads(capsys.readouterr().out)
        assert results[name]["beam2"]["bleu"] == pytest.approx(alone["bleu"])
        assert results[name]["beam2"]["chrf"] == pytest.approx(alone["chrf"])
        row = next(line for line in out if line.startswith(f"| {name} |"))
        assert f"{alone['bleu']:.2f} / {alone['chrf']:.1f}" in row
    assert script.main([str(tmp_path)]) == 2
    assert "not a run folder" in capsys.readouterr().err
    assert script.main([str(runs["seed1"]), "--decodings", "beam"]) == 2
    assert script.main([str(runs["seed1"]), "--decodings", "beam2-lp"]) == 2
    # beamK-lpA is `selfattn eval --beam K --length-penalty A`, scored as that command scores.
    assert script.main([f"s={runs['seed0']}", "--decodings", "beam2-lp2.5", "--split", "dev"]) == 0
    penalised = json.loads(capsys.readouterr().out.strip().splitlines()[-1])["s"]["beam2-lp2.5"]
    flags = ["--split", "dev", "--beam", "2", "--length-penalty", "2.5", "--threads", "1"]
    assert main(["eval", str(runs["seed0"]), *flags]) == 0
    assert penalised["bleu"] == pytest.approx(json.loads(capsys.readouterr().out)["bleu"])


@pytest.mark.slow
def test_the_last_epochs_averaged_are_scored_beside_the_best(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = _run(tmp_path, "a", 0, keep_epochs=2)
    capsys.readouterr()
    script = load_script("benchmarks/translation_scores.py")
    assert script.main([f"kept={run}", "--decodings", "greedy", "--average", "2"]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    results = json.loads(out[-1])
    assert list(results) == ["kept", "kept-avg2"]
    averaged = tmp_path / "a-avg2"
    assert results["kept-avg2"]["dev_accuracy"] is None
    assert results["kept-avg2"]["steps"] == results["kept"]["steps"]
    assert main(["eval", str(averaged), "--split", "test", "--greedy", "--threads", "1"]) == 0
    alone = json.loads(capsys.readouterr().out)
    assert results["kept-avg2"]["greedy"]["bleu"] == pytest.approx(alone["bleu"])
    assert any(line.startswith("| kept-avg2 | ") and "(last 2 averaged)" in line for line in out)
    # Run again: the average is written anew over the one before. A folder named with "="
    # (a sweep's member) is read whole, or named NAME=FOLDER with the first "=".
    member = run.rename(tmp_path / "config=a_seed=0")
    assert script.main([str(member), "--decodings", "greedy", "--average", "2"]) == 0
    assert list(json.loads(capsys.readouterr().out.strip().splitlines()[-1])) == [
        "config=a_seed=0",
        "config=a_seed=0-avg2",
    ]
    assert script.main([f"kept={member}", "--decodings", "greedy"]) == 0
    assert list(json.loads(capsys.readouterr().out.strip().splitlines()[-1])) == ["kept"]
    run = member
    # A run that kept fewer epochs than asked is refused in one line.
    assert script.main([f"kept={run}", "--average", "3"]) == 2
    error = capsys.readouterr().err.strip()
    assert "\n" not in error and "keep_epochs >= 3" in error


def test_a_decoding_name_says_the_eval_flags() -> None:
    script = load_script("benchmarks/translation_scores.py")
    assert script.decoding_flags("greedy") == ["--greedy"]
    assert script.decoding_flags("beam5") == ["--beam", "5"]
    assert script.decoding_flags("beam5-lp0.6") == ["--beam", "5", "--length-penalty", "0.6"]
    assert script.decoding_flags("beam12-lp2") == ["--beam", "12", "--length-penalty", "2"]
    for bad in ("beam0", "beam5-lp", "beam5-lp-1", "beam5lp1", "beam5-lp1.", "top5"):
        with pytest.raises(ValueError, match="beamK-lpA"):
            script.decoding_flags(bad)
