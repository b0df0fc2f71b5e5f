"""model.ffn_dropout and model.head_dropout: where dropout goes (the default 0 and 0:
BERT's placement; ``"none"``: everywhere ``model.dropout`` says), in every model that has a
feed-forward network or a head, and refused where there is none."""

from __future__ import annotations

from dataclasses import asdict

import pytest
from torch import nn

from selfattn.blocks.conformer import ConformerFeedForward
from selfattn.blocks.feedforward import FeedForward
from selfattn.models.pretrained import build_pretrained_model
from selfattn.models.registry import model_options
from selfattn.models.seq2seq_builder import build_seq2seq_model
from selfattn.models.seq2seq_options import Seq2SeqConfig
from selfattn.models.task_model import TaskSpec, build_model_from_spec
from selfattn.pretrained.bert import BertConfig

TOKEN = TaskSpec(task="token", num_labels=3, vocab_size=20, max_len=16)
SIZES = {"embed_dim": 16, "num_heads": 2, "ffn_dim": 32, "dropout": 0.1}


def _hidden_rates(model: nn.Module) -> set[float]:
    rates = set()
    for module in model.modules():
        if isinstance(module, FeedForward):
            rates.add(module.dropout.p)
        elif isinstance(module, ConformerFeedForward):
            rates.add(module.hidden_dropout.p)
    return rates


@pytest.mark.parametrize("architecture", ["transformer", "conformer"])
def test_none_puts_dropout_everywhere(architecture: str) -> None:
    config = model_options(architecture=architecture, ffn_dropout=None, head_dropout=None, **SIZES)
    model = build_model_from_spec(config, TOKEN)
    assert _hidden_rates(model) == {0.1}
    assert model.head.dropout.p == 0.1


@pytest.mark.parametrize("architecture", ["transformer", "conformer"])
def test_the_default_is_bert_placement(architecture: str) -> None:
    model = build_model_from_spec(model_options(architecture=architecture, **SIZES), TOKEN)
    assert _hidden_rates(model) == {0.0}
    assert model.head.dropout.p == 0.0


@pytest.mark.parametrize("architecture", ["transformer", "conformer"])
def test_bert_placement(architecture: str) -> None:
    config = model_options(architecture=architecture, ffn_dropout=0.0, head_dropout=0.0, **SIZES)
    model = build_model_from_spec(config, TOKEN)
    assert _hidden_rates(model) == {0.0}
    assert model.head.dropout.p == 0.0
    # Everything else keeps model.dropout: embeddings, sub-layer outputs, attention weights.
    others = {m.p for name, m in model.named_modules() if isinstance(m, nn.Dropout) and m.p != 0.0}
    assert others == {0.1}
    assert {m.dropout for m in model.modules() if hasattr(m, "kernel")} == {0.1}


def test_sequence_head_and_other_rates() -> None:
    spec = TaskSpec(task="sequence", num_labels=2, vocab_size=20, max_len=16)
    model = build_model_from_spec(model_options(ffn_dropout=0.2, head_dropout=0.3, **SIZES), spec)
    assert _hidden_rates(model) == {0.2}
    assert model.head.dropout.p == 0.3


def test_baselines_honour_head_dropout_and_refuse_ffn_dropout() -> None:
    model = build_model_from_spec(model_options(architecture="bigru", head_dropout=0.3), TOKEN)
    assert model.head.dropout.p == 0.3
    with pytest.raises(ValueError, match=r"^model.ffn_dropout = 0.2: architecture 'bigru'"):
        build_model_from_spec(model_options(architecture="bigru", ffn_dropout=0.2), TOKEN)


@pytest.mark.parametrize("name", ["ffn_dropout", "head_dropout"])
@pytest.mark.parametrize("rate", [-0.1, 1.0])
def test_rates_out_of_range_are_refused(name: str, rate: float) -> None:
    with pytest.raises(ValueError, match=rf"^model.{name} must be in \[0, 1\) or none"):
        model_options(**{name: rate})


def test_seq2seq_reads_ffn_dropout_and_refuses_head_dropout() -> None:
    spec = TaskSpec(task="seq2seq", num_labels=20, vocab_size=20, max_len=16)
    model = build_seq2seq_model(model_options(ffn_dropout=0.2, **SIZES), Seq2SeqConfig(), spec)
    assert _hidden_rates(model) == {0.2}  # encoder and decoder blocks
    with pytest.raises(ValueError, match="no dropout before its output layer"):
        build_seq2seq_model(model_options(head_dropout=0.1, **SIZES), Seq2SeqConfig(), spec)


def test_pretrained_takes_head_dropout_and_ffn_dropout_zero_only() -> None:
    bert = asdict(BertConfig(50, 16, 1, 2, 32))
    config = model_options(pretrained="tiny", ffn_dropout=0.0, head_dropout=0.0)
    model = build_pretrained_model(config, task="token", pretrained=bert, num_labels=3)
    assert model.head.dropout.p == 0.0
    with pytest.raises(ValueError, match="no feed-forward hidden dropout"):
        build_pretrained_model(
            model_options(pretrained="tiny", ffn_dropout=0.1),
            task="token",
            pretrained=bert,
            num_labels=3,
        )


def test_a_fine_tune_saved_before_the_defaults_changed_still_builds() -> None:
    """Such a run stores ffn_dropout = "none", dropout_masks = "bernoulli" and
    linear_layers = "torch" (the former defaults): BERT reads the last two and has no
    feed-forward hidden dropout, so "none" means what 0 means."""
    bert = asdict(BertConfig(50, 16, 1, 2, 32))
    config = model_options(
        pretrained="tiny", ffn_dropout=None, dropout_masks="bernoulli", linear_layers="torch"
    )
    model = build_pretrained_model(config, task="token", pretrained=bert, num_labels=3)
    assert not any(type(m) is not nn.Dropout for m in model.modules() if isinstance(m, nn.Dropout))
    assert all(type(m) is nn.Linear for m in model.modules() if isinstance(m, nn.Linear))
