"""Attention maps at model level: every architecture with attention shows them (per layer
``(B, H, L, L)``, rows summing to 1 over real keys, nothing on padding), the others refuse
in one line; a [CLS] vector is position 0 of the maps."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from selfattn.datatypes import Batch
from selfattn.models.composed import TaskModel
from selfattn.models.registry import model_options
from selfattn.models.spec import TaskSpec
from selfattn.models.task_model import build_model_from_spec

VOCAB, LENGTHS = 20, [6, 3, 5]
SMALL = {"embed_dim": 16, "num_heads": 2, "num_layers": 2, "ffn_dim": 32, "dropout": 0.0}


def _batch(task: str = "token") -> Batch:
    length = max(LENGTHS)
    mask = torch.arange(length)[None, :] >= torch.tensor(LENGTHS)[:, None]
    tokens = torch.randint(1, VOCAB, (len(LENGTHS), length)).masked_fill(mask, 0)
    labels = torch.zeros(len(LENGTHS), length if task == "token" else 1, dtype=torch.long)
    return Batch(tokens, None, None, mask, labels.squeeze(-1) if task != "token" else labels)


def _model(task: str = "token", **options: object) -> TaskModel:
    config = model_options(**{**SMALL, **options})  # type: ignore[arg-type]
    spec = TaskSpec(task=task, num_labels=3, vocab_size=VOCAB, max_len=16)  # type: ignore[arg-type]
    return build_model_from_spec(config, spec).eval()


def _check_maps(maps: list[torch.Tensor], padding: torch.Tensor, layers: int, heads: int) -> None:
    b, length = padding.shape
    assert len(maps) == layers
    for weights in maps:
        assert weights.shape == (b, heads, length, length)
        real_rows = ~padding[:, None, :, None]
        sums = weights.sum(-1, keepdim=True)
        torch.testing.assert_close(
            sums[real_rows.expand_as(sums)], torch.ones(int(real_rows.sum()) * heads)
        )
        assert float(weights.masked_select(padding[:, None, None, :]).abs().max()) == 0


@pytest.mark.parametrize("architecture", ["transformer", "conformer"])
@pytest.mark.parametrize("attention", ["dense", "window"])
def test_attention_architectures_show_their_maps(architecture: str, attention: str) -> None:
    size: dict[str, Any] = {"attention_size": 1} if attention == "window" else {}
    model = _model(architecture=architecture, attention=attention, **size)
    batch = _batch()
    maps = model.attention_maps(batch)
    _check_maps(maps, batch.key_padding_mask, layers=2, heads=2)
    if attention == "window":  # |i − j| > 1 gets nothing
        far = (torch.arange(6)[:, None] - torch.arange(6)[None, :]).abs() > 1
        assert all(float(m[..., far].abs().max()) == 0 for m in maps)


def test_the_maps_are_the_weights_the_model_uses() -> None:
    model = _model()
    batch = _batch()
    maps = model.attention_maps(batch)
    x, mask = model.encoder_inputs(batch)
    stack: Any = model.encoder.encoder
    _, weights = stack.layers[0](stack.absolute(x), key_padding_mask=mask, need_weights=True)
    torch.testing.assert_close(maps[0], weights)


def test_a_kernel_without_weights_refuses_in_one_line() -> None:
    model = _model(attention="linformer", attention_size=4)
    with pytest.raises(ValueError, match="linformer") as error:
        model.attention_maps(_batch())
    assert "\n" not in str(error.value)


@pytest.mark.parametrize("architecture", ["fc", "fc_window", "bigru", "cnn"])
def test_architectures_without_attention_refuse(architecture: str) -> None:
    model = _model(architecture=architecture, num_heads=4)
    with pytest.raises(
        ValueError, match=rf"^architecture '{architecture}' has no attention to show$"
    ):
        model.attention_maps(_batch())


def test_the_cnn2d_baseline_refuses_too() -> None:
    config = model_options(
        architecture="cnn2d", embed_dim=8, num_layers=1, ffn_dim=8, positional=None
    )
    spec = TaskSpec(task="sequence", num_labels=2, feature_dim=1, image_shape=(4, 4, 1))
    model = build_model_from_spec(config, spec)
    batch = Batch(
        None, None, torch.rand(2, 16, 1), torch.zeros(2, 16, dtype=torch.bool), torch.zeros(2)
    )
    with pytest.raises(ValueError, match=r"^architecture 'cnn2d' has no attention to show$"):
        model.attention_maps(batch)


@pytest.mark.parametrize("architecture", ["transformer", "conformer"])
def test_a_cls_vector_comes_first_in_the_maps(architecture: str) -> None:
    model = _model("sequence", architecture=architecture, pooling="cls")
    assert model.cls_token is not None
    batch = _batch("sequence")
    maps = model.attention_maps(batch)
    padding = torch.cat([torch.zeros(len(LENGTHS), 1, dtype=torch.bool), batch.key_padding_mask], 1)
    _check_maps(maps, padding, layers=2, heads=2)
    assert all(float(m[:, :, 1:, 0].min()) > 0 for m in maps)  # every token sees [CLS]
    assert model.attention_labels(["a", "b"]) == ["[CLS]", "a", "b"]
    assert _model().attention_labels(["a", "b"]) == ["a", "b"]


def test_the_cls_head_reads_the_cls_output_and_ignores_padding() -> None:
    model = _model("sequence", pooling="cls")
    batch = _batch("sequence")
    logits = model(batch)
    x, mask = model.encoder_inputs(batch)
    h = model.encoder(x, mask)
    torch.testing.assert_close(logits, model.head.proj(h[:, 0]))
    # More padding with garbage in it changes nothing.
    wider = Batch(
        torch.cat([batch.token_ids, torch.randint(1, VOCAB, (len(LENGTHS), 4))], 1),  # type: ignore[list-item]
        None,
        None,
        torch.cat([batch.key_padding_mask, torch.ones(len(LENGTHS), 4, dtype=torch.bool)], 1),
        batch.labels,
    )
    torch.testing.assert_close(model(wider), logits, atol=1e-5, rtol=1e-5)
