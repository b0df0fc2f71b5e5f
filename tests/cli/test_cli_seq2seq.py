"""Seq2seq from the command line: train, resume, eval with every decoding, predict, and
one-line errors, on a reversal task the test writes as ``source<TAB>target`` lines."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

from selfattn.cli.main import main
from selfattn.tasks import Predictor, Seq2SeqTask
from selfattn.tasks.seq2seq import search as seq2seq_search

from ..helpers_cli import QUICK_TRAIN, TINY_MODEL, one_line_error, train_and_resume, write_config
from ..helpers_data import write_pairs

SYMBOLS = ["a", "b", "c", "d", "e", "f"]
#: The [train] section of the reversal runs of this file and test_cli_rnn.py.
TRAIN = {**QUICK_TRAIN, "warmup_steps": 10}


def _pairs(path: Path, count: int, seed: int) -> Path:
    """``count`` reversal pairs of 2 to 5 :data:`SYMBOLS`."""
    return write_pairs(path, count, seed, symbols=SYMBOLS)


def _config(tmp_path: Path, run_dir: Path, *, epochs: int, extra: str = "") -> Path:
    """A 2-layer Transformer with a length predictor on 400 reversal pairs; ``extra``:
    more ``[seq2seq]`` lines."""
    return write_config(
        tmp_path / "reverse.toml",
        run_dir=run_dir,
        data=reversal_data(tmp_path, 400, 40),
        model={**TINY_MODEL, "embed_dim": 32, "num_layers": 2, "ffn_dim": 64},
        seq2seq="nat = true\n" + extra,
        train={**TRAIN, "epochs": epochs},
    )


def reversal_data(tmp_path: Path, train: int, dev: int) -> dict[str, object]:
    """``[data]`` of a reversal run: ``train`` pairs, and ``dev`` more as dev and test."""
    dev_file = _pairs(tmp_path / "dev.tsv", dev, 1)
    return {
        "dataset": _pairs(tmp_path / "train.tsv", train, 0),
        "dev": dev_file,
        "test": dev_file,
        "task": "seq2seq",
        "batch_size": 32,
        "max_len": 12,
    }


def counted(search: Callable[..., Any], sizes: list[int]) -> Callable[..., Any]:
    """``search`` that notes the batch size of every call in ``sizes``."""

    def wrapper(model: Any, encoded: Any, **options: Any) -> Any:
        sizes.append(int(encoded.memory.shape[0]))
        return search(model, encoded, **options)

    return wrapper


@pytest.mark.slow
def test_train_resume_eval_predict(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    run_dir = tmp_path / "run"
    config = _config(tmp_path, run_dir, epochs=2)
    train_and_resume(config, run_dir, first=2, last=3)
    capsys.readouterr()

    results = {}
    for flags in (["--greedy"], ["--beam", "3"], ["--nat"], ["--sample", "--temperature", "0.5"]):
        assert main(["eval", str(run_dir), *flags]) == 0
        metrics = json.loads(capsys.readouterr().out)
        assert {"bleu", "chrf", "exact_match", "sentences_per_s"} <= set(metrics)
        assert 0.0 <= metrics["bleu"] <= 100.0 and metrics["count"] == 40
        results[metrics["decoding"]] = metrics
    assert set(results) == {"greedy", "beam", "nat", "sample"}
    # --batch-size changes how many sources go through at once, not what they decode to
    # (40 dev sources: batches of 7 leave a partial one; 1 decodes each alone).
    searches: list[int] = []
    for name in ("greedy", "beam_search"):
        search = getattr(seq2seq_search, name)
        monkeypatch.setattr(seq2seq_search, name, counted(search, searches))
    for flags, method in ((["--beam", "3"], "beam"), (["--greedy"], "greedy")):
        for size, calls in (("7", 6), ("1", 40)):
            searches.clear()
            assert main(["eval", str(run_dir), *flags, "--batch-size", size]) == 0
            assert len(searches) == calls and max(searches) == int(size)
            metrics = json.loads(capsys.readouterr().out)
            for key in ("bleu", "chrf", "exact_match", "token_error_rate", "count"):
                assert metrics[key] == results[method][key], (method, size, key)
    monkeypatch.undo()

    # --length-penalty reaches beam search in place of the config's α (1); other decodings
    # and a negative α refuse it in one line.
    alphas: list[float] = []
    beam = seq2seq_search.beam_search

    def noting(model: Any, encoded: Any, **options: Any) -> Any:
        alphas.append(options["length_penalty"])
        return beam(model, encoded, **options)

    monkeypatch.setattr(seq2seq_search, "beam_search", noting)
    assert main(["eval", str(run_dir), "--beam", "3", "--length-penalty", "0"]) == 0
    assert json.loads(capsys.readouterr().out)["decoding"] == "beam"
    assert alphas and set(alphas) == {0.0}
    monkeypatch.undo()
    error = one_line_error(capsys, ["eval", str(run_dir), "--greedy", "--length-penalty", "1"])
    assert "--length-penalty applies to beam search, not greedy" in error
    error = one_line_error(capsys, ["eval", str(run_dir), "--beam", "2", "--length-penalty=-1"])
    assert "--length-penalty must be a finite number >= 0, got -1.0" in error

    assert main(["predict", str(run_dir), "a b c", "--beam", "2"]) == 0
    output = capsys.readouterr().out.strip()
    assert output and all(word in SYMBOLS for word in output.split())
    # The predictor and the command line agree.
    predictor = Predictor(run_dir)
    example = predictor.example("a b c")
    assert predictor.predict(example, method="beam", beam_size=2) == output

    # Cross-attention: output tokens (and EOS) against the source tokens.
    image = tmp_path / "cross.png"
    assert main(["attention", str(run_dir), "a b c", "-o", str(image)]) == 0
    assert image.stat().st_size > 0
    assert isinstance(predictor.task, Seq2SeqTask)
    maps, source, produced = predictor.task.cross_attention_maps(predictor.model, example)
    assert source == ["a", "b", "c"] and produced[-1] == "<eos>"
    assert len(maps) == 2 and maps[0].shape == (2, len(produced), 3)
    torch.testing.assert_close(maps[0].sum(-1), torch.ones(2, len(produced)))


def test_malformed_parallel_line_is_one_line_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = _config(tmp_path, tmp_path / "run", epochs=1)
    (tmp_path / "train.tsv").write_text("a b\tb a\nno tab here\n", encoding="utf-8")
    error = one_line_error(capsys, ["train", str(config), "--no-progress"])
    assert "train.tsv:2" in error


def test_unknown_seq2seq_key_lists_valid_ones(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = _config(tmp_path, tmp_path / "run", epochs=1, extra="beams = 3")
    assert main(["train", str(config), "--no-progress"]) == 2
    error = capsys.readouterr().err
    assert "seq2seq.beams" in error and "beam_size" in error


def test_nat_decoding_without_length_predictor_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = _config(tmp_path, tmp_path / "run", epochs=1)
    text = config.read_text().replace("nat = true", 'nat = false\ndecoding = "nat"')
    config.write_text(text)
    assert main(["train", str(config), "--no-progress"]) == 2
    assert "seq2seq.nat = true" in capsys.readouterr().err
