"""The lecture's attention options as config fields: ``model.score``, ``model.normalizer``,
``model.include_self``, ``model.share_weights``, ``pooling = "cls"``; each reaches the
model, and what cannot work is refused in one line naming the fields."""

from __future__ import annotations

import pytest
import torch

from selfattn.attention import MultiHeadAttention
from selfattn.attention.scores import AdditiveScore
from selfattn.datatypes import Batch
from selfattn.models.architectures import BiGRUOptions
from selfattn.models.heads import ClsToken
from selfattn.models.registry import model_options, options_for
from selfattn.models.task_model import (
    TaskModel,
    TaskSpec,
    build_model_from_spec,
    input_length_limit,
)

SMALL = {"embed_dim": 16, "num_heads": 2, "num_layers": 2, "ffn_dim": 32, "dropout": 0.0}
TEXT = TaskSpec(task="sequence", num_labels=3, vocab_size=20, max_len=8)


def _model(spec: TaskSpec = TEXT, **options: object) -> TaskModel:
    return build_model_from_spec(model_options(**{**SMALL, **options}), spec).eval()  # type: ignore[arg-type]


def _attentions(model: TaskModel) -> list[MultiHeadAttention]:
    return [m for m in model.modules() if isinstance(m, MultiHeadAttention)]


def _batch() -> Batch:
    mask = torch.tensor([[False] * 5, [False] * 3 + [True] * 2])
    tokens = torch.randint(1, 20, (2, 5)).masked_fill(mask, 0)
    return Batch(tokens, None, None, mask, torch.zeros(2, dtype=torch.long))


@pytest.mark.parametrize("architecture", ["transformer", "conformer"])
def test_score_and_normalizer_reach_every_attention(architecture: str) -> None:
    model = _model(architecture=architecture, score="additive", normalizer="relu")
    attentions = _attentions(model)
    assert len(attentions) == 2
    assert all(isinstance(a.score, AdditiveScore) and a.normalizer == "relu" for a in attentions)
    maps = model.attention_maps(_batch())
    assert not torch.allclose(maps[0].sum(-1)[0], torch.ones(2, 5))  # ReLU does not normalise
    assert float(maps[0].min()) >= 0


def test_include_self_off_leaves_the_diagonal_empty() -> None:
    model = _model(include_self=False)
    assert not any(a.include_self for a in _attentions(model))
    for weights in model.attention_maps(_batch()):
        assert float(weights.diagonal(dim1=-2, dim2=-1).abs().max()) == 0


@pytest.mark.parametrize("architecture", ["transformer", "conformer", "graph"])
def test_shared_weights_cost_one_layer(architecture: str) -> None:
    shared = _model(architecture=architecture, num_layers=4, share_weights=True)
    single = _model(architecture=architecture, num_layers=1)
    count = sum(p.numel() for p in shared.parameters())
    assert count == sum(p.numel() for p in single.parameters())
    assert len(shared.attention_maps(_batch())) == 4


def test_pooling_cls_adds_one_learned_vector_and_one_position() -> None:
    model = _model(pooling="cls", positional="learned")
    assert isinstance(model.cls_token, ClsToken)
    plain = _model(pooling="first", positional="learned")
    extra = sum(p.numel() for p in model.parameters()) - sum(p.numel() for p in plain.parameters())
    assert extra == 2 * SMALL["embed_dim"]  # the [CLS] vector and its learned position
    assert (
        input_length_limit(model)
        == input_length_limit(plain)
        == (
            TEXT.max_len,
            "its learned positional table ends there",
        )
    )
    logits = model(_batch())
    assert logits.shape == (2, 3)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"score": "cosine"}, r"model\.score: unknown score 'cosine'"),
        ({"normalizer": "tanh"}, r"model\.normalizer: unknown normaliser 'tanh'"),
        (
            {"attention": "window", "attention_size": 2, "score": "dot"},
            r'model\.score = "dot" needs model\.attention = "dense": kernel \'window\'',
        ),
        (
            {"attention": "linear", "normalizer": "relu"},
            r'model\.normalizer = "relu" needs model\.attention = "dense"',
        ),
        (
            {"attention": "performer", "include_self": False},
            r"model\.include_self = false needs model\.attention",
        ),
        (
            {"attention": "linear", "attention_dropout": 0.1},
            r"model\.attention_dropout = 0\.1: model\.attention 'linear' forms no attention",
        ),
        ({"char_dim": 24}, r"model\.char_dim = 24 needs model\.char_features = true"),
    ],
)
def test_what_cannot_work_is_refused_in_one_line(options: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message) as error:
        model_options(**options)  # type: ignore[arg-type]
    assert "\n" not in str(error.value)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (
            {"architecture": "fc", "num_heads": 8},
            r"model\.num_heads = 8: architecture 'fc' does not use it; leave it at its default",
        ),
        (
            {"architecture": "bigru", "positional": "learned"},
            r'model\.positional = "learned": architecture \'bigru\' does not use it',
        ),
        (
            {"architecture": "conformer", "norm_first": False},
            r"model\.norm_first = false: architecture 'conformer' does not use it",
        ),
        (
            {"architecture": "graph", "score": "dot"},
            r"model\.score = \"dot\": architecture 'graph' does not use it",
        ),
        (
            {"architecture": "cnn", "pooling": "cls"},
            r'model\.pooling = "cls" needs an attention encoder',
        ),
    ],
)
def test_what_the_architecture_does_not_read_is_refused_by_its_options_or_at_build(
    options: dict[str, object], message: str
) -> None:
    spec = TaskSpec(task="sequence", num_labels=2, vocab_size=20)
    with pytest.raises(ValueError, match=message) as error:
        build_model_from_spec(model_options(**options), spec)  # type: ignore[arg-type]
    assert "\n" not in str(error.value)


def test_options_for_another_architecture_keep_only_what_it_reads() -> None:
    config = model_options(num_heads=2, positional="relative", norm_first=False, dropout=0.2)
    baseline = options_for(config, "bigru")
    assert baseline.architecture == "bigru" and baseline.dropout == 0.2
    assert baseline == BiGRUOptions(dropout=0.2)  # no heads, positions or norm_first
    assert options_for(config, "transformer") == config


def test_architectures_without_positions_accept_none() -> None:
    for architecture in ("fc", "fc_window", "bigru", "cnn", "graph"):
        config = model_options(architecture=architecture, positional=None)  # type: ignore[arg-type]
        assert build_model_from_spec(config, TEXT).spec == TEXT


@pytest.mark.parametrize(
    ("task", "options", "spec", "message"),
    [
        ("token", {"pooling": "cls"}, {"vocab_size": 20}, "a token task pools nothing"),
        ("sequence", {"char_features": True}, {"feature_dim": 3}, "this data is not words"),
        ("sequence", {"word_dropout": 0.1}, {"feature_dim": 3}, "this data is not words"),
    ],
)
def test_what_a_task_or_input_cannot_use_is_refused_at_build(
    task: str, options: dict[str, object], spec: dict[str, object], message: str
) -> None:
    task_spec = TaskSpec(task=task, num_labels=2, **spec)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=message) as error:
        build_model_from_spec(model_options(**options), task_spec)  # type: ignore[arg-type]
    assert "\n" not in str(error.value)
