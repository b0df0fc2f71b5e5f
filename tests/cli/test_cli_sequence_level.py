"""Fine-tuning a seq2seq run with sequence-level training from the command line:
``train.init_from`` starts from the base run's exact weights, ``train.objective = "mrt"`` /
``"reinforce"`` train for ``train.max_steps`` steps, the result evaluates, and a run of
another model is refused in one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from selfattn.cli.main import main
from selfattn.config import load_config
from selfattn.tasks import Predictor
from selfattn.tasks.run import inherited_state, prepare
from selfattn.train.init_from import load_initial_weights

from ..helpers_cli import set_flags
from .test_cli_own_data import config_file, reviews
from .test_cli_rnn import _config  # the RNN encoder–decoder on the reversal pairs


def test_fine_tune_with_mrt_and_reinforce(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = tmp_path / "base"
    config = _config(tmp_path, base, epochs=1)
    assert main(["train", str(config), "--no-progress"]) == 0

    # init_from copies the base's weights exactly into the freshly built model.
    tuned = load_config(config, [f"train.init_from={base}", "run_dir=x"])
    prepared = prepare(tuned)
    model = prepared.task.build()
    stored = Predictor(base).model.state_dict()
    assert any(not torch.equal(v, stored[k]) for k, v in model.state_dict().items())
    load_initial_weights(model, base, tuned, prepared.spec, prepared.vocabs())
    assert all(torch.equal(v, stored[k]) for k, v in model.state_dict().items())
    capsys.readouterr()

    for objective in ("mrt", "reinforce"):
        run = tmp_path / objective
        flags = [
            f"run_dir={run}",
            f"train.objective={objective}",
            f"train.init_from={base}",
            "train.max_steps=3",
            "train.sequence_samples=3",
        ]
        args = [arg for flag in flags for arg in ("--set", flag)]
        assert main(["train", str(config), *args, "--no-progress"]) == 0
        err = capsys.readouterr().err
        assert f"starting from the weights of {base / 'best'}" in err
        assert "stopping at train.max_steps = 3" in err
        lines = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
        assert [line["step"] for line in lines] == [3]
        assert main(["eval", str(run), "--greedy"]) == 0
        assert {"bleu", "token_error_rate"} <= set(json.loads(capsys.readouterr().out))

    bad = ["--set", f"train.init_from={base}", "--set", "model.embed_dim=16"]
    assert main(["train", str(config), *bad, "--set", f"run_dir={tmp_path / 'bad'}"]) == 2
    error = capsys.readouterr().err.strip()
    assert "holds another model (differing: model.embed_dim)" in error
    assert len(error.splitlines()) == 1


def test_resume_and_init_from_reuse_the_runs_bpe(tmp_path: Path) -> None:
    """The tokenizers library numbers learned BPE pieces differently from one training to
    the next; a run that continues or fine-tunes another must read with its ids."""
    base = tmp_path / "base"
    config = _config(tmp_path, base, epochs=1)
    settings = ["data.bpe_vocab_size=24", "model.embed_dim=16", "seq2seq.share_embeddings=true"]
    assert main(["train", str(config), *set_flags(*settings)]) == 0
    stored = Predictor(base).task.state()
    tuned = load_config(config, [*settings, f"train.init_from={base}", "run_dir=y"])
    assert inherited_state(tuned) == stored
    assert prepare(tuned, inherited=inherited_state(tuned)).vocabs() == stored
    resumed = load_config(config, settings)
    assert inherited_state(resumed, resume=True) == stored
    other = load_config(config, ["data.bpe_vocab_size=30", f"train.init_from={base}"])
    assert inherited_state(other) == {}  # other vocabulary settings: learned afresh


def test_a_resumed_classifier_reuses_its_bpe(tmp_path: Path) -> None:
    config = config_file(tmp_path, reviews(tmp_path / "train.csv", 40), data={"bpe_vocab_size": 30})
    assert main(["train", str(config), "--no-progress"]) == 0
    stored = Predictor(tmp_path / "run").task.state()
    assert stored["bpe"]
    inherited = inherited_state(load_config(config), resume=True)
    assert inherited == stored
    assert prepare(load_config(config), inherited=inherited).vocabs() == stored
