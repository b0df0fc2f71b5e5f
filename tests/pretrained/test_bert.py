"""BERT weights into selfattn's modules: every layer equals Hugging Face's ``BertModel``
on the same folder, and a bad folder is one line naming the file."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import torch
import transformers  # a dev dependency: CI must run this parity test, not skip it
from safetensors.torch import load_file, save_file
from tokenizers import Tokenizer

from selfattn.pretrained.bert import (
    BertConfig,
    BertEncoder,
    CheckpointError,
    bert_from_folder,
    load_bert,
    parameter_map,
)
from selfattn.pretrained.weights import PretrainedError

from ..helpers_data import edit_json
from ..helpers_pretrained import assert_hidden_states_equal, padded_ids

pytestmark = pytest.mark.usefixtures("one_thread")

SIZES = {
    "vocab_size": 100,
    "hidden_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "intermediate_size": 128,
    "max_position_embeddings": 32,
}


@pytest.fixture(scope="module")
def hf_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small random ``BertModel`` saved as safetensors (what ``save_pretrained`` writes)."""
    torch.manual_seed(0)
    # Weights 5x BERT's initial scale: with std 0.02 the feed-forward pre-activations are so
    # small that the tanh GELU is within 1e-5 of the exact one, and the test could not tell.
    model = transformers.BertModel(transformers.BertConfig(**SIZES, initializer_range=0.1))
    # Random LayerNorm affines and biases too, so a swapped weight/bias cannot hide.
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if "LayerNorm" in name or name.endswith("bias"):
                parameter.normal_(0.0 if name.endswith("bias") else 1.0, 0.1)
    folder = tmp_path_factory.mktemp("bert")
    model.save_pretrained(folder)
    return folder


def batch() -> dict[str, torch.Tensor]:
    """Three "sentences" of 9, 5 and 2 tokens, padded with 0 to 9, two segments in one."""
    inputs = padded_ids(SIZES["vocab_size"])
    token_type_ids = torch.zeros_like(inputs["input_ids"])
    token_type_ids[0, 5:] = 1
    return {**inputs, "token_type_ids": token_type_ids}


def test_every_layer_equals_hugging_face(hf_folder: Path) -> None:
    reference = transformers.BertModel.from_pretrained(hf_folder).eval()
    ours = bert_from_folder(hf_folder)
    assert not ours.training
    assert_hidden_states_equal(ours, reference, batch(), SIZES["num_hidden_layers"])


def test_without_mask_and_segments_equals_hugging_face(hf_folder: Path) -> None:
    reference = transformers.BertModel.from_pretrained(hf_folder).eval()
    ours = load_bert(hf_folder)
    input_ids = batch()["input_ids"][:1]
    with torch.no_grad():
        expected = reference(input_ids, output_hidden_states=True).hidden_states
        got = ours(input_ids).hidden_states
    for mine, theirs in zip(got, expected, strict=True):
        torch.testing.assert_close(mine, theirs, rtol=0, atol=1e-5)


def test_real_minilm_equals_hugging_face(minilm_folder: Path) -> None:
    """all-MiniLM-L6-v2 (6 layers, 384 wide, 12 heads) on tokenized sentences of three
    lengths: every layer within 1e-5 of Hugging Face."""
    tokenizer = Tokenizer.from_file(str(minilm_folder / "tokenizer.json"))
    tokenizer.enable_padding(pad_id=0)
    encodings = tokenizer.encode_batch(
        [
            "The lecture's self-attention is the BERT encoder.",
            "Short one.",
            "A longer sentence, so that two rows of the batch end in padding tokens.",
        ]
    )
    inputs = {
        "input_ids": torch.tensor([e.ids for e in encodings]),
        "attention_mask": torch.tensor([e.attention_mask for e in encodings]),
        "token_type_ids": torch.tensor([e.type_ids for e in encodings]),
    }
    reference = transformers.BertModel.from_pretrained(minilm_folder).eval()
    ours = load_bert(minilm_folder)
    with torch.no_grad():
        expected = reference(**inputs, output_hidden_states=True).hidden_states
        got = ours(**inputs).hidden_states
    assert len(got) == 7
    real = inputs["attention_mask"].bool()
    assert not real.all()
    for layer, (mine, theirs) in enumerate(zip(got, expected, strict=True)):
        difference = (mine[real] - theirs[real]).abs().max().item()
        assert difference <= 1e-5, f"hidden state {layer}: max |difference| {difference:.2e}"


def test_config_maps_to_a_post_ln_gelu_stack(hf_folder: Path) -> None:
    stack = bert_from_folder(hf_folder).encoder.config
    assert (stack.norm_first, stack.activation, stack.layer_norm_eps) == (False, "gelu", 1e-12)
    assert stack.positional is None and stack.has_final_norm is False
    assert (stack.embed_dim, stack.num_heads, stack.ffn_dim, stack.num_layers) == (64, 4, 128, 2)


def test_padding_does_not_change_real_positions(hf_folder: Path) -> None:
    ours = load_bert(hf_folder)
    inputs = batch()
    with torch.no_grad():
        padded = ours(inputs["input_ids"][1:2], inputs["attention_mask"][1:2]).last_hidden_state
        alone = ours(inputs["input_ids"][1:2, :5]).last_hidden_state
    torch.testing.assert_close(padded[:, :5], alone, rtol=0, atol=1e-5)


def test_every_parameter_is_mapped() -> None:
    model = BertEncoder(BertConfig(**SIZES))
    assert set(parameter_map(SIZES["num_hidden_layers"])) == set(model.state_dict())


def test_task_model_prefix_is_dropped(hf_folder: Path, tmp_path: Path) -> None:
    shutil.copy(hf_folder / "config.json", tmp_path / "config.json")
    weights = load_file(hf_folder / "model.safetensors")
    save_file(
        {f"bert.{name}": tensor for name, tensor in weights.items()}, tmp_path / "model.safetensors"
    )
    prefixed, plain = load_bert(tmp_path), load_bert(hf_folder)
    for (name, mine), theirs in zip(
        prefixed.state_dict().items(), plain.state_dict().values(), strict=True
    ):
        assert torch.equal(mine, theirs), name


# ---------------------------------------------------------------------- bad inputs


def copy_folder(source: Path, target: Path) -> Path:
    for name in ("config.json", "model.safetensors"):
        shutil.copy(source / name, target / name)
    return target


def edit_config(folder: Path, **changes: Any) -> None:
    edit_json(folder / "config.json", **changes)


def refused(folder: Path) -> str:
    with pytest.raises(CheckpointError) as caught:
        bert_from_folder(folder)
    message = str(caught.value)
    assert "\n" not in message
    return message


@pytest.mark.parametrize("missing", ["config.json", "model.safetensors"])
def test_missing_file_is_named(hf_folder: Path, tmp_path: Path, missing: str) -> None:
    folder = copy_folder(hf_folder, tmp_path)
    (folder / missing).unlink()
    message = refused(folder)
    assert str(folder / missing) in message and "not a BERT folder" in message


def test_not_a_folder(tmp_path: Path) -> None:
    assert "not a folder" in refused(tmp_path / "nowhere")


def test_load_bert_names_the_missing_file(hf_folder: Path, tmp_path: Path) -> None:
    folder = copy_folder(hf_folder, tmp_path)
    (folder / "model.safetensors").unlink()
    with pytest.raises(PretrainedError) as caught:
        load_bert(folder)
    assert str(folder / "model.safetensors") in str(caught.value)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize(
    ("changes", "words"),
    [
        ({"model_type": "gpt2"}, "model_type 'gpt2' is not a BERT-family encoder"),
        ({"position_embedding_type": "relative_key"}, "position_embedding_type"),
        ({"hidden_act": "gelu_new"}, "hidden_act 'gelu_new'"),
        ({"hidden_size": "64"}, "hidden_size must be a positive integer"),
    ],
)
def test_config_that_is_not_bert(
    hf_folder: Path, tmp_path: Path, changes: dict[str, Any], words: str
) -> None:
    folder = copy_folder(hf_folder, tmp_path)
    edit_config(folder, **changes)
    message = refused(folder)
    assert message.startswith(str(folder / "config.json")) and words in message


def test_config_that_is_not_json(hf_folder: Path, tmp_path: Path) -> None:
    folder = copy_folder(hf_folder, tmp_path)
    (folder / "config.json").write_text("{not json")
    assert "not valid JSON" in refused(folder)


def test_config_missing_a_size(hf_folder: Path, tmp_path: Path) -> None:
    folder = copy_folder(hf_folder, tmp_path)
    config = json.loads((folder / "config.json").read_text())
    del config["num_attention_heads"]
    (folder / "config.json").write_text(json.dumps(config))
    assert "missing num_attention_heads" in refused(folder)


def test_shapes_that_do_not_match_the_weights(hf_folder: Path, tmp_path: Path) -> None:
    folder = copy_folder(hf_folder, tmp_path)
    edit_config(folder, intermediate_size=256)
    message = refused(folder)
    assert message.startswith(str(folder / "model.safetensors"))
    assert "'encoder.layer.0.intermediate.dense.weight' has shape (128, 64)" in message
    assert "config.json implies (256, 64)" in message


def test_more_layers_than_the_config_says(hf_folder: Path, tmp_path: Path) -> None:
    folder = copy_folder(hf_folder, tmp_path)
    edit_config(folder, num_hidden_layers=1)
    assert "more than the 1 layers" in refused(folder)


def test_missing_tensor_is_named(hf_folder: Path, tmp_path: Path) -> None:
    folder = copy_folder(hf_folder, tmp_path)
    weights = load_file(folder / "model.safetensors")
    del weights["encoder.layer.1.output.LayerNorm.bias"]
    save_file(weights, folder / "model.safetensors")
    assert "'encoder.layer.1.output.LayerNorm.bias' is missing" in refused(folder)


@pytest.mark.parametrize("keep", [0, 5, 1000, -100])
def test_truncated_safetensors(hf_folder: Path, tmp_path: Path, keep: int) -> None:
    folder = copy_folder(hf_folder, tmp_path)
    path = folder / "model.safetensors"
    data = path.read_bytes()
    path.write_bytes(data[:keep])
    message = refused(folder)
    assert message.startswith(str(path)) and "truncated or corrupt" in message


def test_ids_outside_the_checkpoint_are_one_line_errors(hf_folder: Path) -> None:
    """Not an index error deep inside nn.Embedding: the id and the table's range."""
    encoder = bert_from_folder(hf_folder)
    vocab = encoder.embeddings.word_embeddings.num_embeddings
    ids = torch.tensor([[1, 2, vocab]])
    with pytest.raises(
        ValueError, match=rf"token id {vocab} is outside the checkpoint's 0…{vocab - 1}"
    ) as info:
        encoder(ids, torch.ones_like(ids))
    assert "\n" not in str(info.value)
    with pytest.raises(ValueError, match="token id -1 is outside"):
        encoder(torch.tensor([[1, -1]]), torch.ones(1, 2, dtype=torch.long))
    with pytest.raises(ValueError, match="token type 7 is outside"):
        encoder(torch.tensor([[1, 2]]), torch.ones(1, 2, dtype=torch.long), torch.tensor([[0, 7]]))
