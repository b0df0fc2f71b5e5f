"""A user's own data from the command line: no dev file, data.max_len, unseen labels.

Every task type trains a tiny model for one epoch on a file the test writes, with no
``data.dev``: a seeded share of the training file becomes the dev set, and the run ends
with exit status 0 and a summary that names what chose the best epoch.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Callable, Mapping
from pathlib import Path

import pytest

from selfattn.cli.main import main

from ..helpers_cli import QUICK_TRAIN, TINY_MODEL, one_line_error, set_flags, write_config
from ..helpers_data import write_pairs, write_tagged, write_vector_sets

TAGS = {"PRP": ["I", "it"], "VBD": ["saw", "bit"], "DT": ["the", "a"], "NN": ["dog", "cat"]}
GOOD, BAD = ["warm", "funny", "best", "great"], ["dull", "long", "mess", "worst"]


def tagged(path: Path, count: int, seed: int = 0) -> Path:
    """``word/TAG`` lines, four words each."""
    return write_tagged(path, count, seed, words=TAGS)


def reviews(path: Path, count: int, seed: int = 0, *, numbers: bool = False) -> Path:
    """``label,text`` rows: pos/neg, or (``numbers``) the count of good words."""
    rng = random.Random(seed)
    rows = []
    for i in range(count):
        words = [rng.choice(GOOD if i % 2 else BAD) for _ in range(rng.randint(2, 5))]
        label = str(sum(word in GOOD for word in words)) if numbers else ("neg", "pos")[i % 2]
        rows.append(f"{label},a {' '.join(words)} film")
    path.write_text("label,text\n" + "\n".join(rows) + "\n", encoding="utf-8")
    return path


def pairs(path: Path, count: int, seed: int = 0) -> Path:
    """``source<TAB>target`` lines: a reversal."""
    return write_pairs(path, count, seed, symbols="abcde", longest=4)


def vector_sets(path: Path, count: int, seed: int = 0) -> Path:
    """An ``.npz`` of vector sets labelled by the sign of their mean."""
    return write_vector_sets(path, count, seed, largest=5)


def config_file(
    tmp_path: Path, dataset: Path, *, task: str = "auto", data: Mapping[str, object] = {}
) -> Path:
    """A tiny model's config for ``dataset`` (no dev file); ``data``: more ``[data]``
    fields."""
    return write_config(
        tmp_path / "own.toml",
        run_dir=tmp_path / "run",
        data={"dataset": dataset, "task": task, "batch_size": 8, **data},
        model=TINY_MODEL,
        train={**QUICK_TRAIN, "epochs": 1},
    )


def train(config: Path, *overrides: str) -> int:
    return main(["train", str(config), "--no-progress", *set_flags("train.threads=1", *overrides)])


Writer = Callable[[Path, int], Path]
TASKS: dict[str, tuple[str, Writer, str, str]] = {
    # name: (file name, writer, data.task, the metric that chooses the best epoch)
    "token": ("train.txt", tagged, "auto", "accuracy"),
    "sequence": ("train.csv", reviews, "auto", "accuracy"),
    "regression": ("train.csv", lambda p, n: reviews(p, n, numbers=True), "regression", "rmse"),
    "seq2seq": ("train.tsv", pairs, "seq2seq", "accuracy"),
    "vectors": ("train.npz", vector_sets, "auto", "accuracy"),
}


@pytest.mark.parametrize("task", list(TASKS))
def test_own_data_without_dev_holds_out_a_dev_set(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], task: str
) -> None:
    name, write, data_task, metric = TASKS[task]
    config = config_file(tmp_path, write(tmp_path / name, 40), task=data_task)
    assert train(config) == 0
    out = capsys.readouterr().out
    note = (
        "no data.dev: holding out 4 of 40 training examples as dev "
        "(data.dev_fraction = 0.1, seed 0)"
    )
    assert out.count(note) == 1
    assert "36 train / 4 dev / 0 test examples; 1 epoch\n" in out
    assert re.search(rf"^best epoch 1: dev {metric} \d+\.\d{{4}}$", out, re.MULTILINE)
    manifest = json.loads((tmp_path / "run" / "best" / "manifest.json").read_text())
    assert manifest["spec"]["max_len"] == 256  # data.max_len, not the longest example

    # eval reads the same held-out dev set.
    assert main(["eval", str(tmp_path / "run"), "--split", "dev", "--greedy"]) == 0
    metrics = json.loads(capsys.readouterr().out)
    assert metrics["count"] == (16 if task == "token" else 4)  # token task: 4 words each


def test_dev_fraction_zero_trains_without_dev_and_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = config_file(tmp_path, reviews(tmp_path / "train.csv", 20))
    assert train(config, "data.dev_fraction=0", "train.epochs=2") == 0
    out = capsys.readouterr().out
    assert out.count("training without dev evaluation") == 1
    assert "20 train / 0 dev / 0 test examples; 2 epochs" in out
    assert re.search(
        r"^best epoch \d by training loss \d+\.\d{4} \(no dev set\)$", out, re.MULTILINE
    )
    assert main(["eval", str(tmp_path / "run"), "--split", "dev"]) == 2
    assert "no dev split" in capsys.readouterr().err


def test_dev_file_is_used_as_given(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = config_file(
        tmp_path,
        tagged(tmp_path / "train.txt", 20),
        data={"dev": tagged(tmp_path / "dev.txt", 5, seed=1)},
    )
    assert train(config) == 0
    out = capsys.readouterr().out
    assert "holding out" not in out and "20 train / 5 dev / 0 test" in out


def test_label_only_in_the_test_file_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    test = tmp_path / "test.txt"
    test.write_text("I/PRP saw/VBD a/DT dog/NN\nit/PRP bit/VBD the/DT cat/XX\n", encoding="utf-8")
    config = config_file(tmp_path, tagged(tmp_path / "train.txt", 20), data={"test": test})
    assert train(config) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "test.txt:2" in err and "'XX'" in err


# --------------------------------------------------------------------------- data.max_len


def long_line_file(tmp_path: Path) -> Path:
    path = tagged(tmp_path / "train.txt", 20)
    lines = path.read_text(encoding="utf-8").splitlines()
    lines[2] = " ".join([lines[2]] * 3)  # line 3: 12 words
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_example_longer_than_max_len_is_refused_before_training(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = config_file(tmp_path, long_line_file(tmp_path))
    assert train(config, "data.max_len=8") == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err
    assert err.endswith(
        "train.txt:3: 12 tokens, longer than data.max_len = 8 (raise data.max_len or set "
        'data.overlong = "cut")'
    )
    assert not (tmp_path / "run").exists()


def test_overlong_cut_keeps_the_first_max_len(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = config_file(tmp_path, long_line_file(tmp_path))
    assert train(config, "data.max_len=8", "data.overlong=cut") == 0
    assert 'data.overlong = "cut": 1 example cut to data.max_len = 8' in capsys.readouterr().out
    manifest = json.loads((tmp_path / "run" / "best" / "manifest.json").read_text())
    assert manifest["spec"]["max_len"] == 8


# --------------------------------------------------------------------------- long inputs


def sentiment_run(tmp_path: Path, positional: str) -> Path:
    config = config_file(tmp_path, reviews(tmp_path / "train.csv", 24))
    assert train(config, f"model.positional={positional}", "data.max_len=8") == 0
    return tmp_path / "run"


LONG_REVIEW = " ".join(["a warm and funny film"] * 13)  # 65 words


def test_unbounded_positions_read_any_length(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_dir = sentiment_run(tmp_path, "sinusoidal")
    capsys.readouterr()
    assert main(["predict", str(run_dir), LONG_REVIEW]) == 0
    captured = capsys.readouterr()
    assert captured.out.split("\t")[0] in ("pos", "neg") and not captured.err
    image = tmp_path / "long.png"
    assert main(["attention", str(run_dir), LONG_REVIEW, "-o", str(image)]) == 0
    assert "1 layer × 2 heads" in capsys.readouterr().out


def test_learned_table_refuses_or_truncates(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_dir = sentiment_run(tmp_path, "learned")
    capsys.readouterr()
    err = one_line_error(capsys, ["predict", str(run_dir), LONG_REVIEW])
    assert "65 tokens" in err and "max_len = 8" in err
    assert main(["predict", str(run_dir), LONG_REVIEW, "--truncate"]) == 0
    captured = capsys.readouterr()
    assert captured.out.split("\t")[0] in ("pos", "neg")
    warning = captured.err.strip()
    assert (
        "\n" not in warning and "warning" in warning and "cut to the model's max_len = 8" in warning
    )


def test_token_task_reads_long_input_in_windows(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    test = tagged(tmp_path / "test.txt", 4, seed=2)
    config = config_file(tmp_path, tagged(tmp_path / "train.txt", 30), data={"test": test})
    assert train(config, "model.positional=learned", "data.max_len=6", "train.epochs=3") == 0
    capsys.readouterr()
    sentence = " ".join(["I saw the dog"] * 5)  # 20 words, windows of 6
    assert main(["predict", str(tmp_path / "run"), sentence]) == 0
    assert len(capsys.readouterr().out.split()) == 20
    # The test file grows past the table: eval scores every word, through windows.
    long_lines = [" ".join([line] * 4) for line in test.read_text().splitlines()]
    test.write_text("\n".join(long_lines) + "\n", encoding="utf-8")
    assert main(["eval", str(tmp_path / "run")]) == 0
    assert json.loads(capsys.readouterr().out)["count"] == 4 * 16


# --------------------------------------------------------------------------- predict input


@pytest.fixture(scope="module")
def tagger(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A one-layer tagger (trained with a dev file)."""
    tmp_path = tmp_path_factory.mktemp("tagger")
    dev = {"dev": tagged(tmp_path / "dev.txt", 4, seed=1)}
    assert train(config_file(tmp_path, tagged(tmp_path / "train.txt", 20), data=dev)) == 0
    return tmp_path / "run"


def test_attention_message_counts_layers_and_heads(
    tagger: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    assert main(["attention", str(tagger), "I saw it", "-o", str(tmp_path / "map.png")]) == 0
    assert capsys.readouterr().out.endswith("(1 layer × 2 heads)\n")


def test_predict_file_of_blank_lines_is_an_error(
    tagger: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    blank = tmp_path / "blank.txt"
    blank.write_text("\n   \n\n", encoding="utf-8")
    err = one_line_error(capsys, ["predict", str(tagger), f"@{blank}"])
    assert err.endswith(f"{blank}: no input lines")


def test_at_sign_text(tagger: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    assert main(["predict", str(tagger), "@home I saw it"]) == 0
    captured = capsys.readouterr()
    assert captured.out.startswith("@/") and len(captured.out.split()) == 5  # @ home I saw it
    assert "no file 'home I saw it'" in captured.err and "read as text" in captured.err
    # @@ is always literal text, even when a file of that name exists.
    (tmp_path / "x").write_text("I saw it\n", encoding="utf-8")
    assert main(["predict", str(tagger), f"@@{tmp_path / 'x'}"]) == 0
    captured = capsys.readouterr()
    assert not captured.err and captured.out.startswith("@/")


def test_help_documents_input_rules_and_defaults(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["predict", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "@@TEXT" in text and "no existing file is read as text" in text
    with pytest.raises(SystemExit):
        main(["eval", "--help"])
    assert "(default: test)" in " ".join(capsys.readouterr().out.split())


@pytest.mark.parametrize("beam", ["0", "-2"])
def test_beam_below_one_is_a_one_line_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], beam: str
) -> None:
    for command in (["predict", str(tmp_path), "a b"], ["eval", str(tmp_path)]):
        err = one_line_error(capsys, [*command, "--beam", beam])
        assert f"--beam must be at least 1, got {beam}" in err


@pytest.mark.parametrize("size", ["0", "-3"])
def test_decoding_batch_size_below_one_is_a_one_line_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], size: str
) -> None:
    err = one_line_error(capsys, ["eval", str(tmp_path), "--batch-size", size])
    assert f"--batch-size must be at least 1, got {size}" in err


def test_seq2seq_source_longer_than_max_len(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The encoder–decoder is built for ``max_len`` source tokens: refuse, or --truncate."""
    config = config_file(tmp_path, pairs(tmp_path / "train.tsv", 20), task="seq2seq")
    assert train(config, "data.max_len=6") == 0
    capsys.readouterr()
    source = " ".join("abcde" * 2)  # 10 tokens
    err = one_line_error(capsys, ["predict", str(tmp_path / "run"), source, "--greedy"])
    assert "10 tokens" in err and "max_len = 6" in err
    assert main(["predict", str(tmp_path / "run"), source, "--greedy", "--truncate"]) == 0
    assert "cut to the model's max_len = 6" in capsys.readouterr().err
    image = tmp_path / "cross.png"
    assert main(["attention", str(tmp_path / "run"), source, "-o", str(image), "--truncate"]) == 0
    assert "1 decoder layer × 2 heads" in capsys.readouterr().out
