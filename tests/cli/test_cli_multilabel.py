"""Multi-label data from the command line, in both of the lecture's forms: a sigmoid head
(``multilabel``) and seq2seq writing the set (``data.task = "seq2seq"``) on one ``.jsonl``
file; ``eval``'s set metrics are those of the sets ``predict`` gives; every malformed
file is refused in one line naming its file and line, with exit status 2."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from selfattn.cli.main import main
from selfattn.data.readers.label_sets import decoded_set, read_label_sets
from selfattn.specials import NO_LABELS
from selfattn.tasks.predictor import Predictor
from selfattn.tasks.set_metrics import set_scores

from ..helpers_cli import QUICK_TRAIN, TINY_MODEL, one_line_error, write_config

pytestmark = pytest.mark.usefixtures("one_thread")

GROUPS = {"animal": ["cat", "dog"], "colour": ["red", "blue"], "number": ["one", "two"]}
FILLER = ["the", "a", "saw", "and"]


def label_sets(path: Path, count: int, seed: int = 0) -> Path:
    """Lines of filler words and words of some groups, labelled by the groups present
    (``<none>`` when none is)."""
    rng = random.Random(seed)
    lines = []
    for _ in range(count):
        chosen = [group for group in GROUPS if rng.random() < 0.4]
        words = [rng.choice(FILLER) for _ in range(2)] + [rng.choice(GROUPS[g]) for g in chosen]
        rng.shuffle(words)
        lines.append(json.dumps({"text": " ".join(words), "labels": chosen or [NO_LABELS]}))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def config_file(tmp_path: Path, *, task: str = "auto") -> Path:
    dataset = label_sets(tmp_path / "train.jsonl", 64)
    test = label_sets(tmp_path / "test.jsonl", 16, seed=1)
    return write_config(
        tmp_path / f"{task}.toml",
        run_dir=tmp_path / task,
        data={"dataset": dataset, "test": test, "task": task, "batch_size": 8},
        model=TINY_MODEL,
        train={**QUICK_TRAIN, "epochs": 3},
    )


def train(config: Path) -> int:
    return main(["train", str(config), "--no-progress", "--set", "train.threads=1"])


def scored_predictions(run: Path, test: Path, task: str, **options: float) -> dict[str, float]:
    """The set metrics of what ``predict`` gives for every line of ``test``."""
    predictor = Predictor(run)
    gold, predicted = [], []
    for example in read_label_sets(test):
        output = predictor.predict(predictor.task.unlabelled(example), **options)
        if task == "auto":  # "a,b<TAB>(a 0.9, …)"
            chosen = output.split("\t")[0]
            predicted.append(set() if chosen == NO_LABELS else set(chosen.split(",")))
        else:  # the decoded sequence: its labels, <none> and repeats dropped
            predicted.append(set(decoded_set(output.split())))
        gold.append(set(example.label))
    return set_scores(predicted, gold)


@pytest.mark.parametrize("task", ["auto", "seq2seq"])
def test_both_forms_train_and_eval_scores_the_predicted_sets(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], task: str
) -> None:
    config, run = config_file(tmp_path, task=task), tmp_path / task
    assert train(config) == 0
    assert "best epoch" in capsys.readouterr().out
    thresholds = [None, 0.3] if task == "auto" else [None]
    for threshold in thresholds:
        flags = [] if threshold is None else ["--threshold", str(threshold)]
        assert main(["eval", str(run), *flags]) == 0
        metrics = json.loads(capsys.readouterr().out)
        options = {} if threshold is None else {"threshold": threshold}
        expected = scored_predictions(run, tmp_path / "test.jsonl", task, **options)
        for name in ("set_f1", "micro_f1", "exact_match", "count"):
            assert metrics[name] == pytest.approx(expected[name]), (name, threshold)
        if task == "auto":
            assert metrics["threshold"] == (threshold or 0.5)
    assert main(["predict", str(run), "the red cat"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 1
    if task == "seq2seq":  # a threshold means nothing to a model that writes the set
        err = one_line_error(capsys, ["predict", str(run), "the red cat", "--threshold", "0.3"])
        assert "--threshold" in err and "multilabel" in err
    else:
        assert main(["eval", str(run), "--threshold", "1.5"]) == 2
        assert "(0, 1)" in capsys.readouterr().err


BAD_LINES = {
    "empty label set": ('{"text": "a cat", "labels": []}', "empty label set"),
    "separator": ('{"text": "a cat", "labels": ["cat,dog"]}', "contains ','"),
    "white space": ('{"text": "a cat", "labels": ["big cat"]}', "white space"),
    "none and labels": ('{"text": "a cat", "labels": ["<none>", "animal"]}', "beside other"),
    "not JSON": ('{"text": "a cat", "labels": [animal]}', "not a JSON object"),
}


@pytest.mark.parametrize("case", sorted(BAD_LINES))
@pytest.mark.parametrize("task", ["auto", "seq2seq"])
def test_a_malformed_line_is_named_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str, task: str
) -> None:
    config = config_file(tmp_path, task=task)
    line, problem = BAD_LINES[case]
    path = tmp_path / "train.jsonl"
    lines = path.read_text(encoding="utf-8").splitlines()
    lines[2] = line
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert train(config) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and f"{path}:3: " in err and problem in err, err


@pytest.mark.parametrize("task", ["auto", "seq2seq"])
def test_an_unknown_label_is_named_at_training_and_at_eval(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], task: str
) -> None:
    config = config_file(tmp_path, task=task)
    test = tmp_path / "test.jsonl"
    good = test.read_text(encoding="utf-8")
    unknown = json.dumps({"text": "a zebra", "labels": ["stripes"]}) + "\n"
    test.write_text(unknown + good, encoding="utf-8")
    assert train(config) == 2  # a label the training file lacks could never be predicted
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and f"{test}:1: " in err and "'stripes'" in err, err
    test.write_text(good, encoding="utf-8")
    assert train(config) == 0
    capsys.readouterr()
    test.write_text(unknown + good, encoding="utf-8")  # the file changed after training
    err = one_line_error(capsys, ["eval", str(tmp_path / task)])
    assert f"{test}:1: " in err and "'stripes'" in err, err
