"""The shipped recipes keep the model settings their documented numbers were measured with.

Four defaults of ``[model]`` changed after these recipes shipped: ``ffn_dropout`` and
``head_dropout`` from ``"none"`` (= ``dropout``) to 0 (BERT's placement),
``dropout_masks`` from ``"bernoulli"`` to ``"uniform"`` and ``linear_layers`` from
``"torch"`` to ``"auto"``. Each recipe shipped before then pins the old values where its
model reads them, so the commands in README.md and docs/ still train what they measured.
"""

from __future__ import annotations

import tomllib
from typing import Any

import pytest

from selfattn.config import load_config

from ..helpers_scripts import CONFIGS

#: The recipes shipped before the defaults changed (a later recipe is free of this).
MEASURED_BEFORE = [
    "convex_hull",
    "copy_lstm",
    "copy_ntm",
    "digit_strings_conformer",
    "digit_strings_espeak",
    "digit_strings_forward",
    "digit_strings_location",
    "digit_strings_rnn",
    "digits_cnn",
    "digits_espeak",
    "digits_vit",
    "fashion_mnist_cnn",
    "fashion_mnist_vit",
    "karate",
    "listops_act",
    "lra_image",
    "lra_listops",
    "lra_text",
    "mnist_5k_cnn",
    "mnist_5k_vit",
    "phones_espeak",
    "pos_wsj",
    "pos_wsj_minilm",
    "qa_memn2n",
    "sentiment_rt",
    "sentiment_rt_exit",
    "sentiment_rt_minilm",
    "sentiment_rt_minilm_probe",
    "solubility",
    "solubility_logs",
    "speaker_jv",
    "speaker_jv_conformer",
    "speaker_jv_exit",
    "translate_bible_en_es",
    "translate_bible_en_es_nat",
    "translate_bible_en_es_rnn",
    "translate_de_en",
    "translate_de_en_nat",
    "translate_de_en_rnn",
    "wsj_constructions",
    "wsj_constructions_seq2seq",
]


def test_every_recipe_measured_before_is_still_shipped() -> None:
    assert sorted(MEASURED_BEFORE) == sorted(
        path.stem for path in CONFIGS.glob("*.toml") if path.stem in MEASURED_BEFORE
    )


@pytest.mark.parametrize("name", MEASURED_BEFORE)
def test_a_recipe_measured_before_trains_with_the_old_defaults(name: str) -> None:
    config = load_config(CONFIGS / f"{name}.toml")
    model: Any = config.model  # the architecture's options: what it reads, no more
    reads = model.field_names()
    seq2seq = "seq2seq" in tomllib.loads((CONFIGS / f"{name}.toml").read_text("utf-8"))
    pretrained = getattr(model, "pretrained", None) is not None
    if "linear_layers" in reads:
        assert model.linear_layers == "torch"
    if "dropout_masks" in reads and model.dropout > 0:
        assert model.dropout_masks == "bernoulli"
    if "ffn_dropout" in reads and not pretrained:  # BERT has none, then and now
        ffn_rate = model.dropout if model.ffn_dropout is None else model.ffn_dropout
        assert ffn_rate == model.dropout  # the FFN's hidden layer drops at `dropout`
    if "head_dropout" in reads and not seq2seq:  # a seq2seq model has no head
        assert model.head_rate == model.dropout
