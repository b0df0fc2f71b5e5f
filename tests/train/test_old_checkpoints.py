"""Checkpoints written before the task-pipeline redesign (format version 1, selfattn
0.1.0 at commit 74ab427) still load and predict what they predicted then.

The fixtures under ``tests/fixtures/checkpoints_v1`` are tiny models (E16, one layer)
trained for one epoch on the files beside them; the expected lines were printed by
``selfattn predict`` of that commit.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from selfattn.cli.main import main

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "checkpoints_v1"

EXPECTED = {
    ("token", "I saw a dog"): "I/DT saw/DT a/DT dog/DT",
    ("token", "a b c"): "a/DT b/DT c/DT",
    ("sequence", "I saw a dog"): "neg\t(neg 0.606, pos 0.394)",
    ("sequence", "a b c"): "neg\t(neg 0.621, pos 0.379)",
    ("seq2seq", "a b c"): "a a a a a a a a a a a a a a a a",
}


@pytest.mark.parametrize(("task", "text"), sorted(EXPECTED))
def test_version_1_checkpoint_predicts_as_it_did(
    task: str, text: str, capsys: pytest.CaptureFixture[str], one_thread: None
) -> None:
    assert main(["predict", str(FIXTURES / task), text]) == 0
    assert capsys.readouterr().out.strip() == EXPECTED[(task, text)]
