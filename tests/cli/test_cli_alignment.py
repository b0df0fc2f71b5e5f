"""``seq2seq.alignment`` from the command line: a tiny train + eval round trip for each
decoder family, and the one-line refusals of settings that cannot apply."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

import pytest

from selfattn.cli.main import main
from selfattn.tasks import Predictor

from ..helpers_cli import QUICK_TRAIN, TINY_MODEL, one_line_error, set_flags, write_config
from ..helpers_data import write_pairs

#: ``[model]`` of each decoder family.
TRANSFORMER = TINY_MODEL
RNN = {"architecture": "rnn", **TINY_MODEL, "num_heads": None, "ffn_dim": 16}


def _config(tmp_path: Path, model: Mapping[str, object], seq2seq: str) -> Path:
    """``model`` and ``seq2seq`` (TOML lines) on copies, ``source<TAB>source`` lines: a
    monotonic alignment."""
    dev = write_pairs(tmp_path / "dev.tsv", 16, 1, reverse=False)
    data = {"dataset": write_pairs(tmp_path / "train.tsv", 96, 0, reverse=False), "dev": dev}
    return write_config(
        tmp_path / "copy.toml",
        run_dir=tmp_path / "run",
        data={**data, "test": dev, "task": "seq2seq", "batch_size": 32, "max_len": 8},
        model=model,
        seq2seq=seq2seq,
        train={**QUICK_TRAIN, "epochs": 1},
    )


@pytest.mark.parametrize(
    ("model", "seq2seq", "kind"),
    [
        (TRANSFORMER, 'alignment = "forward"\nforward_max_advance = 2', "forward"),
        (RNN, 'alignment = "location"\nlocation_filters = 4\nguided_attention = 1.0', "location"),
    ],
    ids=["transformer-forward", "rnn-location"],
)
def test_train_and_eval_round_trip(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    model: Mapping[str, object],
    seq2seq: str,
    kind: str,
) -> None:
    config = _config(tmp_path, model, seq2seq)
    assert main(["train", str(config), "--no-progress"]) == 0
    capsys.readouterr()
    run_dir = tmp_path / "run"
    for flags in (["--greedy"], ["--beam", "2"]):
        assert main(["eval", str(run_dir), *flags]) == 0
        metrics = json.loads(capsys.readouterr().out)
        assert metrics["count"] == 16 and metrics["token_error_rate"] >= 0.0
    # The run was rebuilt with its alignment (not silently as content attention).
    predictor = Predictor(run_dir)
    modules = [m for name, m in predictor.model.named_modules() if name.endswith("alignment")]
    assert modules and all(m.kind == kind for m in modules)


@pytest.mark.parametrize(
    ("model", "settings", "words"),
    [
        (TRANSFORMER, ["seq2seq.location_width=7"], "read by seq2seq.alignment = 'location'"),
        (
            RNN,
            ["seq2seq.alignment=location", "seq2seq.forward_max_advance=3"],
            "read by seq2seq.alignment = 'forward'",
        ),
        (TRANSFORMER, ["seq2seq.alignment=location", "seq2seq.location_width=4"], "odd"),
        (TRANSFORMER, ["seq2seq.alignment=monotonic"], "seq2seq.alignment"),
        (
            TRANSFORMER,
            ["seq2seq.alignment=forward", "model.normalizer=relu"],
            'model.normalizer = "softmax"',
        ),
    ],
    ids=["width-without-location", "advance-without-forward", "even-width", "unknown", "relu"],
)
def test_settings_that_cannot_apply_are_one_line_errors(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    model: Mapping[str, object],
    settings: list[str],
    words: str,
) -> None:
    config = _config(tmp_path, model, "")
    error = one_line_error(capsys, ["train", str(config), *set_flags(*settings), "--no-progress"])
    assert words in error
    assert not (tmp_path / "run" / "metrics.jsonl").exists()
