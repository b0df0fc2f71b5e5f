"""The memory network from the command line on the generated bAbI-style stories: train,
resume, eval, predict, and the attention of every hop over the story's facts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from selfattn.cli.main import main
from selfattn.explore.page import read_payload
from selfattn.tasks import Predictor

from ..data.test_story_files import _write_babi
from ..helpers_scripts import CONFIGS
from ..tiny_runs import train_config

CONFIG = CONFIGS / "qa_memn2n.toml"
STORY = "mary went to the kitchen . john moved to the garden . mary travelled to the office ."
QUESTION = "where is mary ?"


def _train(run_dir: Path, *settings: str, resume: bool = False) -> int:
    return train_config(CONFIG, run_dir, *settings, resume=resume)


def _weights(run_dir: Path) -> dict[str, torch.Tensor]:
    (path,) = (run_dir / "last").glob("model-*.safetensors")
    return load_file(path)


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run_dir = tmp_path_factory.mktemp("qa") / "run"
    fast = ("model.linear_start_steps=0", "train.lr=0.01")  # 8 epochs
    assert _train(run_dir, "train.epochs=8", *fast) == 0
    return run_dir


def test_a_resumed_run_ends_as_an_uninterrupted_one(tmp_path: Path) -> None:
    """Across linear start's switch and random noise's draws (a constant learning rate, so
    that asking for more epochs on resuming changes nothing else)."""
    straight, resumed = tmp_path / "straight", tmp_path / "resumed"
    short = (
        "data.train_fraction=0.2",  # 200 stories: 7 steps an epoch
        'train.schedule="constant"',
        "model.linear_start_steps=10",  # linear into the second epoch
    )
    assert _train(straight, "train.epochs=3", *short) == 0
    assert _train(resumed, "train.epochs=1", *short) == 0
    with pytest.warns(UserWarning, match="resuming with changed settings train.epochs"):
        assert _train(resumed, "train.epochs=3", *short, resume=True) == 0
    a, b = _weights(straight), _weights(resumed)
    assert a.keys() == b.keys()
    for name in a:
        torch.testing.assert_close(a[name], b[name], rtol=0, atol=0, msg=name)
    assert not bool(a["linear"])  # 21 steps: past linear start


def test_eval_predict_and_the_attention_of_every_hop(
    trained: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    assert main(["eval", str(trained), "--threads", "1"]) == 0
    metrics = json.loads(capsys.readouterr().out)
    assert metrics["count"] == 1000 and metrics["accuracy"] > 0.5  # 6 places: chance 1/6

    assert main(["predict", str(trained), f"{STORY} {QUESTION}"]) == 0
    assert capsys.readouterr().out.split("\t")[0] == "office"

    image = tmp_path / "hops.png"
    assert main(["attention", str(trained), f"{STORY} {QUESTION}", "-o", str(image)]) == 0
    assert "memory attention (3 hops × 1 head)" in capsys.readouterr().out
    assert image.read_bytes()[:4] == b"\x89PNG"

    predictor = Predictor(trained / "best")
    (figure,) = predictor.attention(predictor.example(f"{STORY} {QUESTION}"))
    assert figure.keys == [fact.strip() + " ." for fact in STORY.split(" .")[:-1]]
    assert figure.queries == [QUESTION] and figure.layer == "hop"
    for weights in figure.maps:
        assert weights.shape == (1, 1, 3)
        torch.testing.assert_close(weights.sum(), torch.tensor(1.0))
    # The fact that answers it: mary's last move, the third.
    assert int(figure.maps[-1].argmax()) == 2


def test_the_explorer_shows_each_hop(trained: Path, tmp_path: Path) -> None:
    page = tmp_path / "page.html"
    assert main(["explore", str(trained), f"{STORY} {QUESTION}", "-o", str(page)]) == 0
    (example,) = read_payload(page.read_text(encoding="utf-8"))["examples"]
    (figure,) = example["figures"]
    assert figure["title"] == "memory attention" and figure["layer"] == "hop"
    assert len(figure["maps"]) == 3 and figure["queries"] == [QUESTION]
    assert len(figure["keys"]) == 3 and figure["distance"] is None


def test_a_users_babi_file_trains_the_memory_network(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    train, test = tmp_path / "qa1_train.txt", tmp_path / "qa1_test.txt"
    _write_babi(train, task=1, size=300, seed=1)
    _write_babi(test, task=1, size=50, seed=2)
    run_dir = tmp_path / "run"
    assert (
        _train(
            run_dir,
            f'data.dataset="{train}"',
            f'data.test="{test}"',
            "data.lowercase=true",
            "train.epochs=2",
        )
        == 0
    )
    capsys.readouterr()
    assert main(["predict", str(run_dir), "Mary went to the garden. Where is Mary?"]) == 0
    assert capsys.readouterr().out.split("\t")[0] in {
        "bathroom",
        "hallway",
        "garden",
        "office",
        "bedroom",
        "kitchen",
    }
