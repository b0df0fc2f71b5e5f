"""``export_hf``: a (fine-tuned) BERT encoder written as a Hugging Face folder loads into
``transformers.BertModel`` and computes every layer as selfattn does."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import transformers

from selfattn.export import export_hf
from selfattn.pretrained import load_bert

pytestmark = pytest.mark.usefixtures("one_thread")


def test_hf_round_trip_equals_every_layer(minilm_folder: Path, tmp_path: Path) -> None:
    bert = load_bert(minilm_folder)
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():  # as if fine-tuned: every weight moved a little
        for parameter in bert.parameters():
            parameter.add_(0.01 * torch.randn(parameter.shape, generator=generator))
    tokenizer = (minilm_folder / "tokenizer.json").read_text(encoding="utf-8")
    out = export_hf(bert, tmp_path / "bert", tokenizer)
    assert (out / "tokenizer.json").read_text(encoding="utf-8") == tokenizer
    config = json.loads((out / "config.json").read_text())
    assert config["model_type"] == "bert" and config["architectures"] == ["BertModel"]

    reference = transformers.BertModel.from_pretrained(out).eval()
    lengths = [9, 5, 2]
    input_ids = torch.randint(1000, 20000, (3, 9), generator=generator)
    attention_mask = (torch.arange(9)[None, :] < torch.tensor(lengths)[:, None]).long()
    input_ids = input_ids * attention_mask
    with torch.no_grad():
        expected = reference(
            input_ids=input_ids, attention_mask=attention_mask, output_hidden_states=True
        ).hidden_states
        got = bert(input_ids, attention_mask).hidden_states
    assert len(got) == len(expected) == bert.config.num_hidden_layers + 1
    real = attention_mask.bool()
    for ours, theirs in zip(got, expected, strict=True):
        torch.testing.assert_close(ours[real], theirs[real], atol=1e-5, rtol=0)


def test_hf_needs_an_existing_parent_folder(minilm_folder: Path, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="does not exist"):
        export_hf(load_bert(minilm_folder), tmp_path / "no" / "bert", None)
