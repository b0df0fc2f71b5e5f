"""``seq2seq.alignment`` from the command line: a tiny train + eval round trip for each
decoder family, and the one-line refusals of settings that cannot apply."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from selfattn.cli.main import main
from selfattn.tasks import Predictor

SYMBOLS = ["a", "b", "c", "d", "e", "f"]
TRANSFORMER = """embed_dim = 16
num_heads = 2
num_layers = 1
ffn_dim = 32
dropout = 0.0"""
RNN = """architecture = "rnn"
embed_dim = 16
num_layers = 1
ffn_dim = 16
dropout = 0.0"""


def _copies(path: Path, count: int, seed: int) -> Path:
    """``source<TAB>target`` lines where the target is the source: a monotonic alignment."""
    rng = random.Random(seed)
    lines = []
    for _ in range(count):
        words = " ".join(rng.choice(SYMBOLS) for _ in range(rng.randint(2, 5)))
        lines.append(f"{words}\t{words}")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _config(tmp_path: Path, model: str, seq2seq: str) -> Path:
    train = _copies(tmp_path / "train.tsv", 96, 0)
    dev = _copies(tmp_path / "dev.tsv", 16, 1)
    config = tmp_path / "copy.toml"
    config.write_text(
        f"""run_dir = "{tmp_path / "run"}"

[data]
dataset = "{train}"
dev = "{dev}"
test = "{dev}"
task = "seq2seq"
batch_size = 32
max_len = 8

[model]
{model}

[seq2seq]
{seq2seq}

[train]
epochs = 1
lr = 3e-3
warmup_steps = 2
seed = 0
device = "cpu"
threads = 1
""",
        encoding="utf-8",
    )
    return config


@pytest.mark.parametrize(
    ("model", "seq2seq", "kind"),
    [
        (TRANSFORMER, 'alignment = "forward"\nforward_max_advance = 2', "forward"),
        (RNN, 'alignment = "location"\nlocation_filters = 4\nguided_attention = 1.0', "location"),
    ],
    ids=["transformer-forward", "rnn-location"],
)
def test_train_and_eval_round_trip(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], model: str, seq2seq: str, kind: str
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
    model: str,
    settings: list[str],
    words: str,
) -> None:
    config = _config(tmp_path, model, "")
    flags = [flag for setting in settings for flag in ("--set", setting)]
    assert main(["train", str(config), *flags, "--no-progress"]) == 2
    error = capsys.readouterr().err.strip()
    assert len(error.splitlines()) == 1 and words in error
    assert not (tmp_path / "run" / "metrics.jsonl").exists()
