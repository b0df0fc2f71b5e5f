"""DistilBERT weights into selfattn's modules: every layer equals Hugging Face's
``DistilBertModel`` on the same folder; a task model's folder (``distilbert.`` prefix)
loads; the export writes a folder ``DistilBertModel`` reads back; bad configs are one
line."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import transformers

from selfattn.export.hf import export_hf
from selfattn.pretrained.bert import BertConfig, BertEncoder, CheckpointError

from ..helpers_data import edit_json

pytestmark = pytest.mark.usefixtures("one_thread")

SIZES = {"vocab_size": 90, "dim": 48, "n_layers": 2, "n_heads": 4, "hidden_dim": 96}


def random_distilbert(model_class: type = transformers.DistilBertModel) -> torch.nn.Module:
    """A small DistilBERT with random norms and biases, so a swap cannot hide."""
    torch.manual_seed(0)
    config = transformers.DistilBertConfig(
        **SIZES, max_position_embeddings=24, initializer_range=0.1
    )
    model = model_class(config)
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if "layer_norm" in name.lower() or name.endswith("bias"):
                parameter.normal_(0.0 if name.endswith("bias") else 1.0, 0.1)
    return model.eval()


@pytest.fixture(scope="module")
def distil_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("distilbert")
    random_distilbert().save_pretrained(folder)
    return folder


def inputs() -> dict[str, torch.Tensor]:
    """Three rows of 9, 5 and 2 tokens, padded with 0."""
    generator = torch.Generator().manual_seed(1)
    input_ids = torch.randint(1, SIZES["vocab_size"], (3, 9), generator=generator)
    attention_mask = torch.zeros(3, 9, dtype=torch.long)
    for row, length in enumerate([9, 5, 2]):
        attention_mask[row, :length] = 1
    return {"input_ids": input_ids * attention_mask, "attention_mask": attention_mask}


def assert_layers_equal(ours: BertEncoder, reference: torch.nn.Module) -> None:
    batch = inputs()
    with torch.no_grad():
        expected = reference(**batch, output_hidden_states=True).hidden_states
        got = ours(**batch).hidden_states
    assert len(got) == len(expected) == SIZES["n_layers"] + 1
    real = batch["attention_mask"].bool()
    for layer, (mine, theirs) in enumerate(zip(got, expected, strict=True)):
        difference = (mine[real] - theirs[real]).abs().max().item()
        assert difference <= 1e-5, f"hidden state {layer}: max |difference| {difference:.2e}"


def test_every_layer_equals_hugging_face(distil_folder: Path) -> None:
    reference = transformers.DistilBertModel.from_pretrained(distil_folder).eval()
    ours = BertEncoder.from_folder(distil_folder)
    assert ours.config.model_type == "distilbert"
    assert ours.embeddings.token_type_embeddings is None
    assert_layers_equal(ours, reference)


def test_a_task_models_folder_loads_its_encoder(tmp_path: Path) -> None:
    """``DistilBertForTokenClassification`` saves ``distilbert.``-prefixed tensors and a
    classifier: the encoder is read, the classifier left to selfattn's own head."""
    tagger = random_distilbert(transformers.DistilBertForTokenClassification)
    tagger.save_pretrained(tmp_path)
    ours = BertEncoder.from_folder(tmp_path)
    assert_layers_equal(ours, tagger.distilbert)


def test_export_round_trips_through_hugging_face(distil_folder: Path, tmp_path: Path) -> None:
    ours = BertEncoder.from_folder(distil_folder)
    export_hf(ours, tmp_path / "out", tokenizer_json=None)
    reread = transformers.DistilBertModel.from_pretrained(tmp_path / "out").eval()
    assert_layers_equal(ours, reread)


def test_segments_are_refused_without_a_segment_table(distil_folder: Path) -> None:
    ours = BertEncoder.from_folder(distil_folder)
    batch = inputs()
    with pytest.raises(ValueError, match="token type ids other than 0"):
        ours(**batch, token_type_ids=torch.ones_like(batch["input_ids"]))


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"sinusoidal_pos_embds": True}, "sinusoidal_pos_embds = true is not supported"),
        ({"n_heads": 5}, r"hidden_size \(48\) is not divisible by num_attention_heads \(5\)"),
        ({"activation": "gelu_new"}, "hidden_act 'gelu_new' has no exact counterpart"),
    ],
)
def test_bad_configs_are_one_line(distil_folder: Path, tmp_path: Path, change, message) -> None:
    import shutil

    folder = tmp_path / "bad"
    shutil.copytree(distil_folder, folder)
    edit_json(folder / "config.json", **change)
    with pytest.raises(CheckpointError, match=message) as error:
        BertConfig.from_file(folder / "config.json")
    assert "\n" not in str(error.value)
