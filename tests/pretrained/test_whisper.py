"""Whisper from selfattn's blocks equals Hugging Face's WhisperForConditionalGeneration:
encoder states and decoder logits on a tiny random Whisper and (slow) on whisper-base;
bad folders are refused in one line naming the file and the tensor."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
import transformers
from safetensors.torch import load_file, save_file

from selfattn.attention.cache import DecoderCache
from selfattn.pretrained.whisper import (
    WhisperModel,
    hf_name,
    is_whisper_checkpoint,
    load_whisper,
)
from selfattn.speech.whisper_mel import whisper_log_mel

from .whisper_fixtures import TINY, mel_features, one_line_refusal, tiny_whisper

pytestmark = pytest.mark.usefixtures("one_thread")

#: Hugging Face's tiny Whisper and selfattn's, from the same folder.
Pair = tuple[transformers.PreTrainedModel, WhisperModel]

TOKENS = torch.tensor([[51, 52, 55, 56, 7, 9, 3], [51, 53, 55, 56, 1, 2, 50]])


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Pair:
    folder = tmp_path_factory.mktemp("tiny-pair")
    return tiny_whisper(folder), load_whisper(folder)


def test_encoder_states_equal_hugging_faces(pair: Pair) -> None:
    theirs, ours = pair
    features = mel_features()
    with torch.no_grad():
        want = theirs.model.encoder(features).last_hidden_state
        got = ours.encoder(features)
    assert got.shape == (2, TINY["max_source_positions"], TINY["d_model"])
    assert float((got - want).abs().max()) < 1e-4


def test_decoder_logits_equal_hugging_faces(pair: Pair) -> None:
    theirs, ours = pair
    features = mel_features()
    with torch.no_grad():
        want = theirs(input_features=features, decoder_input_ids=TOKENS).logits
        got = ours(features, TOKENS)
    assert got.shape == (2, TOKENS.shape[1], TINY["vocab_size"])
    assert float((got - want).abs().max()) < 1e-4
    assert not torch.equal(got[0, -1], got[1, -1])


def test_incremental_decoding_with_the_cache_equals_the_full_pass(pair: Pair) -> None:
    _, ours = pair
    memory = ours.encoder(mel_features())
    with torch.no_grad():
        full = ours.decoder(TOKENS, memory)
        cache = DecoderCache(capacity=TOKENS.shape[1])
        steps = [ours.decoder(TOKENS[:, :4], memory, cache=cache)]
        steps += [ours.decoder(TOKENS[:, t : t + 1], memory, cache=cache) for t in range(4, 7)]
    torch.testing.assert_close(torch.cat(steps, dim=1), full, rtol=1e-5, atol=1e-5)


def test_the_output_projection_is_the_token_embedding(pair: Pair) -> None:
    _, ours = pair
    names = [name for name, _ in ours.named_parameters()]
    assert not any("proj_out" in name or "lm_head" in name for name in names)
    assert hf_name("decoder.stack.layers.1.cross_attn.q_proj.weight") == (
        "model.decoder.layers.1.encoder_attn.q_proj.weight"
    )
    assert hf_name("encoder.stack.layers.0.self_attn.k_proj.bias") is None
    assert torch.count_nonzero(ours.encoder.stack.layers[0].self_attn.k_proj.bias) == 0


def test_fewer_frames_than_the_window_are_read(pair: Pair) -> None:
    _, ours = pair
    states = ours.encoder(torch.randn(1, TINY["num_mel_bins"], 10))
    assert states.shape == (1, 5, TINY["d_model"])
    with pytest.raises(ValueError, match="13 encoder positions; the model has 12"):
        ours.encoder(torch.randn(1, TINY["num_mel_bins"], 26))


def test_a_whisper_checkpoint_is_told_from_others(tiny_folder: Path, tmp_path: Path) -> None:
    assert is_whisper_checkpoint("whisper-base") and is_whisper_checkpoint(tiny_folder)
    assert not is_whisper_checkpoint("minilm-l6")
    assert not is_whisper_checkpoint(tmp_path)  # no config.json: a run folder, say
    (tmp_path / "config.json").write_text('{"model_type": "bert"}')
    assert not is_whisper_checkpoint(tmp_path)


def _copy(folder: Path, tmp_path: Path) -> Path:
    out = tmp_path / "copy"
    shutil.copytree(folder, out)
    return out


def _refusal(folder: Path) -> str:
    return one_line_refusal(load_whisper, folder)


def test_a_folder_of_another_model_type_is_refused(tiny_folder: Path, tmp_path: Path) -> None:
    folder = _copy(tiny_folder, tmp_path)
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "model_type": "bert"}))
    assert "model_type is 'bert', not 'whisper'" in _refusal(folder)


def test_a_missing_tensor_is_named(tiny_folder: Path, tmp_path: Path) -> None:
    folder = _copy(tiny_folder, tmp_path)
    state = load_file(str(folder / "model.safetensors"))
    del state["model.decoder.layers.1.encoder_attn.v_proj.weight"]
    save_file(state, str(folder / "model.safetensors"))
    message = _refusal(folder)
    assert "tensor model.decoder.layers.1.encoder_attn.v_proj.weight is missing" in message


def test_a_mis_shaped_tensor_is_named_before_any_weight_is_read(
    tiny_folder: Path, tmp_path: Path
) -> None:
    folder = _copy(tiny_folder, tmp_path)
    state = load_file(str(folder / "model.safetensors"))
    state["model.encoder.layers.0.fc1.weight"] = torch.zeros(31, 16)
    save_file(state, str(folder / "model.safetensors"))
    message = _refusal(folder)
    assert "model.encoder.layers.0.fc1.weight has shape [31, 16], config.json implies [32, 16]" in (
        message
    )


def test_a_tensor_that_is_not_whispers_is_named(tiny_folder: Path, tmp_path: Path) -> None:
    folder = _copy(tiny_folder, tmp_path)
    state = load_file(str(folder / "model.safetensors"))
    state["model.decoder.layers.7.fc1.weight"] = torch.zeros(2, 2)
    save_file(state, str(folder / "model.safetensors"))
    assert "model.decoder.layers.7.fc1.weight is not part of a Whisper model" in _refusal(folder)


@pytest.mark.slow
def test_whisper_base_equals_hugging_face_on_a_real_recording(
    whisper_folder: Path, librivox: dict[str, tuple[Path, str]]
) -> None:
    from selfattn.data.readers.audio import read_wav

    wav, _ = librivox["sense_and_sensibility_01_austen_64kb-0880"]
    samples, _ = read_wav(wav, sample_rate=16000)
    features = whisper_log_mel(samples).unsqueeze(0)
    theirs = transformers.WhisperForConditionalGeneration.from_pretrained(whisper_folder).eval()
    ours = load_whisper(whisper_folder)
    tokens = torch.tensor([[50258, 50259, 50359, 50363, 634, 390, 406]])  # " He was not"
    with torch.no_grad():
        want_states = theirs.model.encoder(features).last_hidden_state
        states = ours.encoder(features)
        want = theirs.proj_out(
            theirs.model.decoder(tokens, encoder_hidden_states=want_states).last_hidden_state
        )
        got = ours.decoder(tokens, states)
    assert float((states - want_states).abs().max()) < 1e-4
    assert float((got - want).abs().max()) < 1e-4
    assert int(got[0, -1].argmax()) == 364  # " an"
