"""Task models: every encoder × head learns, padding never leaks, and the builder's errors."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch
import torch.nn.functional as F

from selfattn.datatypes import Batch
from selfattn.models.architectures import ARCHITECTURES, ENCODERS
from selfattn.models.composed import TaskModel
from selfattn.models.heads import POOLINGS
from selfattn.models.option_groups import ModelOptions
from selfattn.models.registry import model_options
from selfattn.models.task_model import CLS_ARCHITECTURES
from selfattn.positional import POSITIONAL

from ..helpers_models import build

VOCAB, CHARS, FEATURES, LABELS = 64, 12, 6, 5
LENGTHS = [6, 4, 5, 2, 6, 3, 1, 6]
SMALL = model_options(embed_dim=32, num_heads=4, num_layers=1, ffn_dim=32, dropout=0.0)
HEADS = ["token", *(f"sequence-{name}" for name in POOLINGS)]
# Every encoder with every head it can feed ([CLS] needs an attention encoder).
ENCODER_HEADS = [
    (architecture, head)
    for architecture in sorted(ENCODERS)
    for head in HEADS
    if head != "sequence-cls" or architecture in CLS_ARCHITECTURES
]


pytestmark = pytest.mark.usefixtures("one_thread")


def _mask(lengths: list[int], length: int) -> torch.Tensor:
    return torch.arange(length)[None, :] >= torch.tensor(lengths)[:, None]  # (B, L)


def _token_batch(lengths: list[int], task: str, extra: int = 0, garbage: bool = False) -> Batch:
    """Distinct token ids everywhere (so any labelling can be memorised), right-padded."""
    length = max(lengths) + extra
    mask = _mask(lengths, length)
    token_ids = torch.randperm(VOCAB - 1)[: len(lengths) * length].view(-1, length) + 1
    char_ids = torch.randint(1, CHARS, (len(lengths), length, 4))
    char_ids[..., 3] = 0  # every word has trailing character padding
    if not garbage:
        token_ids = token_ids.masked_fill(mask, 0)
        char_ids = char_ids.masked_fill(mask[..., None], 0)
    return Batch(token_ids, char_ids, None, mask, _labels(lengths, length, task))


def _feature_batch(lengths: list[int], task: str) -> Batch:
    length = max(lengths)
    mask = _mask(lengths, length)
    features = torch.randn(len(lengths), length, FEATURES).masked_fill(mask[..., None], 0.0)
    return Batch(None, None, features, mask, _labels(lengths, length, task))


def _labels(lengths: list[int], length: int, task: str) -> torch.Tensor:
    if task == "sequence":
        return torch.randint(LABELS, (len(lengths),))
    return torch.randint(LABELS, (len(lengths), length)).masked_fill(_mask(lengths, length), -100)


def _config(architecture: str, **options: object) -> ModelOptions:
    """SMALL for ``architecture``, with 3-wide convolutions and windows where it has them."""
    reads = ARCHITECTURES[architecture].options.field_names()
    window = {"window_k": 1} if "window_k" in reads else {}
    return model_options(**{**vars(SMALL), "architecture": architecture, **window, **options})


def _model(architecture: str, head: str, *, features: bool = False) -> TaskModel:
    task, _, pooling = head.partition("-")
    text = {} if features else {"char_features": True, "char_dim": 16}
    config = _config(architecture, pooling=pooling or "mean", **text)
    inputs = (
        {"feature_dim": FEATURES} if features else {"vocab_size": VOCAB, "char_vocab_size": CHARS}
    )
    return build(config, task, num_labels=LABELS, max_len=32, **inputs)


def _accuracy(logits: torch.Tensor, labels: torch.Tensor) -> float:
    real = labels != -100
    return float((logits.argmax(-1) == labels)[real].float().mean())


@pytest.mark.parametrize(("architecture", "head"), ENCODER_HEADS)
def test_every_encoder_and_head_overfits_a_tiny_batch(architecture: str, head: str) -> None:
    task = head.partition("-")[0]
    batch = _token_batch(LENGTHS, task)
    model = _model(architecture, head)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    for _ in range(150):
        logits = model(batch)
        if _accuracy(logits, batch.labels) == 1.0:
            break
        loss = F.cross_entropy(logits.flatten(0, -2), batch.labels.flatten(), ignore_index=-100)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    assert _accuracy(model(batch), batch.labels) == 1.0


def _assert_padding_invariant(model: TaskModel, short: Batch, long: Batch, token: bool) -> None:
    model.eval()
    with torch.no_grad():
        a, b = model(short), model(long)
    if token:
        real = ~short.key_padding_mask
        b = b[:, : a.shape[1]]
        torch.testing.assert_close(a[real], b[real], atol=1e-5, rtol=1e-5)
    else:
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)


def _with_more_padding(batch: Batch, extra: int, extra_chars: int = 0) -> Batch:
    """``batch`` with ``extra`` more padded positions holding random garbage."""

    def grow(t: torch.Tensor | None, fill: torch.Tensor | None) -> torch.Tensor | None:
        return None if t is None or fill is None else torch.cat([t, fill], dim=1)

    b = batch.key_padding_mask.shape[0]
    token_ids = grow(batch.token_ids, torch.randint(1, VOCAB, (b, extra)))
    char_ids = batch.char_ids
    if char_ids is not None:
        char_ids = F.pad(char_ids, (0, extra_chars))  # more character padding per word
        char_ids = grow(char_ids, torch.randint(1, CHARS, (b, extra, char_ids.shape[2])))
    features = grow(batch.features, torch.randn(b, extra, FEATURES))
    mask = torch.cat([batch.key_padding_mask, torch.ones(b, extra, dtype=torch.bool)], dim=1)
    labels = batch.labels
    if labels.dim() == 2:
        labels = F.pad(labels, (0, extra), value=-100)
    return Batch(token_ids, char_ids, features, mask, labels)


@pytest.mark.parametrize("kind", ["tokens", "features"])
@pytest.mark.parametrize(("architecture", "head"), ENCODER_HEADS)
def test_padding_never_changes_real_positions(architecture: str, head: str, kind: str) -> None:
    features = kind == "features"
    task = head.partition("-")[0]
    model = _model(architecture, head, features=features)
    short = _feature_batch(LENGTHS, task) if features else _token_batch(LENGTHS, task)
    # Garbage in the padding of the short batch too: only the mask may say what is real.
    if not features:
        short = _token_batch(LENGTHS, task, garbage=True)
    long = _with_more_padding(short, extra=5, extra_chars=3)
    _assert_padding_invariant(model, short, long, token=task == "token")


@pytest.mark.parametrize("positional", sorted(POSITIONAL))
def test_transformer_padding_invariance_for_every_positional_encoding(positional: str) -> None:
    config = replace(SMALL, positional=positional)
    model = build(config, "token", num_labels=LABELS, vocab_size=VOCAB, max_len=32)
    short = _token_batch(LENGTHS, "token", garbage=True)
    _assert_padding_invariant(model, short, _with_more_padding(short, extra=7), token=True)


def test_attention_maps_of_the_transformer() -> None:
    model = _model("transformer", "token").eval()
    batch = _token_batch(LENGTHS, "token")
    with torch.no_grad():
        maps = model.attention_maps(batch)
    b, length = batch.key_padding_mask.shape
    assert len(maps) == SMALL.num_layers
    assert maps[0].shape == (b, SMALL.num_heads, length, length)
    torch.testing.assert_close(maps[0].sum(-1), torch.ones(b, SMALL.num_heads, length))
    assert float(maps[0].masked_select(batch.key_padding_mask[:, None, None, :]).abs().max()) == 0


@pytest.mark.parametrize("architecture", ["bigru", "cnn", "fc", "fc_window"])
def test_attention_maps_refused_without_attention(architecture: str) -> None:
    model = _model(architecture, "token")
    with pytest.raises(
        ValueError, match=f"^architecture '{architecture}' has no attention to show$"
    ):
        model.attention_maps(_token_batch(LENGTHS, "token"))


def test_bigru_refuses_left_padding() -> None:
    model = _model("bigru", "token")
    batch = _token_batch(LENGTHS, "token")
    flipped = Batch(
        batch.token_ids, batch.char_ids, None, batch.key_padding_mask.flip(1), batch.labels
    )
    with pytest.raises(ValueError, match="right-padded"):
        model(flipped)


def test_builder_errors() -> None:
    with pytest.raises(ValueError, match="exactly one of vocab_size and feature_dim"):
        build(SMALL, "token", vocab_size=5, feature_dim=3)
    with pytest.raises(ValueError, match="no character vocabulary"):
        build(replace(SMALL, char_features=True), "token", vocab_size=5)
    with pytest.raises(ValueError, match="unknown task"):
        build(SMALL, "seq2seq", vocab_size=5)
    with pytest.raises(ValueError, match="divisible"):
        replace(SMALL, num_heads=5)


def test_character_features_survive_unseen_words() -> None:
    """Two words with one (unseen, shared) id but different spellings get different vectors."""
    model = _model("fc", "token").eval()
    token_ids = torch.tensor([[7, 7]])
    char_ids = torch.tensor([[[1, 2, 0], [3, 4, 5]]])
    batch = Batch(token_ids, char_ids, None, torch.zeros(1, 2, dtype=torch.bool), token_ids)
    vectors = model.embedding(batch)
    assert not torch.allclose(vectors[0, 0], vectors[0, 1])
