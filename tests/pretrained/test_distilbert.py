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
from selfattn.pretrained.bert import BertEncoder, CheckpointError, bert_from_folder
from selfattn.pretrained.bert_config import bert_config_from_file

from ..helpers_data import edit_json
from ..helpers_pretrained import assert_hidden_states_equal, fetched_weights, padded_ids

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
    return padded_ids(SIZES["vocab_size"])


def assert_layers_equal(ours: BertEncoder, reference: torch.nn.Module) -> None:
    assert_hidden_states_equal(ours, reference, inputs(), SIZES["n_layers"])


def test_every_layer_equals_hugging_face(distil_folder: Path) -> None:
    reference = transformers.DistilBertModel.from_pretrained(distil_folder).eval()
    ours = bert_from_folder(distil_folder)
    assert ours.config.model_type == "distilbert"
    assert ours.embeddings.token_type_embeddings is None
    assert_layers_equal(ours, reference)


def test_a_task_models_folder_loads_its_encoder(tmp_path: Path) -> None:
    """``DistilBertForTokenClassification`` saves ``distilbert.``-prefixed tensors and a
    classifier: the encoder is read, the classifier left to selfattn's own head."""
    tagger = random_distilbert(transformers.DistilBertForTokenClassification)
    tagger.save_pretrained(tmp_path)
    ours = bert_from_folder(tmp_path)
    assert_layers_equal(ours, tagger.distilbert)


def test_export_round_trips_through_hugging_face(distil_folder: Path, tmp_path: Path) -> None:
    ours = bert_from_folder(distil_folder)
    export_hf(ours, tmp_path / "out", tokenizer_json=None)
    reread = transformers.DistilBertModel.from_pretrained(tmp_path / "out").eval()
    assert_layers_equal(ours, reread)


def test_segments_are_refused_without_a_segment_table(distil_folder: Path) -> None:
    ours = bert_from_folder(distil_folder)
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
        bert_config_from_file(folder / "config.json")
    assert "\n" not in str(error.value)


@pytest.fixture(scope="module")
def distilbert_cased() -> Path:
    """The converted distilbert-cased folder, or a skip saying why it cannot be had."""
    return fetched_weights("distilbert-cased")


SENTENCES = [
    "I have went to the store yesterday.",
    "She dont like apples and oranges.",
    "The Quick brown fox jumps over the lazy dog in Paris.",
]


def tokenized(folder: Path) -> dict[str, torch.Tensor]:
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
    tokenizer.enable_padding(pad_id=0)
    encodings = tokenizer.encode_batch(SENTENCES)
    return {
        "input_ids": torch.tensor([e.ids for e in encodings]),
        "attention_mask": torch.tensor([e.attention_mask for e in encodings]),
    }


@pytest.mark.slow
def test_real_distilbert_cased_equals_hugging_face(distilbert_cased: Path) -> None:
    """The converted checkpoint (6 layers, 768 wide, cased) through selfattn's modules:
    every layer within 1e-5 of Hugging Face's DistilBertModel on the same folder."""
    batch = tokenized(distilbert_cased)
    ours = bert_from_folder(distilbert_cased)
    reference = transformers.DistilBertModel.from_pretrained(distilbert_cased).eval()
    assert (ours.config.hidden_size, ours.config.num_hidden_layers) == (768, 6)
    with torch.no_grad():
        expected = reference(**batch, output_hidden_states=True).hidden_states
        got = ours(**batch).hidden_states
    real = batch["attention_mask"].bool()
    for layer, (mine, theirs) in enumerate(zip(got, expected, strict=True)):
        difference = (mine[real] - theirs[real]).abs().max().item()
        assert difference <= 1e-5, f"hidden state {layer}: max |difference| {difference:.2e}"


@pytest.mark.slow
def test_conversion_reproduces_the_int8_tagger(distilbert_cased: Path) -> None:
    """The float32 conversion tags as the int8 ONNX graph does (which also rounds its
    activations to int8, so a few close calls may differ), and makes the package's own
    edit: "have went" → "have gone"."""
    ort = pytest.importorskip("onnxruntime")
    from selfattn.pretrained.weights import PRETRAINED

    batch = tokenized(distilbert_cased)
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    graph = PRETRAINED["distilbert-cased"].archive_folder / "tagger.onnx"
    session = ort.InferenceSession(str(graph), options)
    (reference,) = session.run(None, {name: t.numpy() for name, t in batch.items()})
    tagger = transformers.DistilBertForTokenClassification.from_pretrained(distilbert_cased)
    with torch.no_grad():
        logits = tagger.eval()(**batch).logits
    real = batch["attention_mask"].bool()
    agree = (logits.argmax(-1) == torch.from_numpy(reference).argmax(-1))[real]
    assert agree.float().mean().item() >= 0.95
    went = batch["input_ids"][0].tolist().index(_piece_id(distilbert_cased, "went"))
    assert tagger.config.id2label[int(logits[0, went].argmax())] == "$REPLACE_gone"


def _piece_id(folder: Path, piece: str) -> int:
    from tokenizers import Tokenizer

    return Tokenizer.from_file(str(folder / "tokenizer.json")).token_to_id(piece)
