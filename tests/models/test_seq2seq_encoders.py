"""Seq2seq gets every encoder option: any attention kernel (window for long speech), the
Conformer, the lecture's options; and its attention maps (encoder, decoder, cross)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
import torch

from selfattn.blocks import ConformerBlock
from selfattn.kernels import WindowKernel
from selfattn.models import Conformer
from selfattn.models.option_groups import ModelOptions
from selfattn.models.registry import model_options
from selfattn.models.seq2seq import BOS_ID, Seq2SeqAttentionMaps, Seq2SeqTransformer
from selfattn.models.seq2seq_builder import build_seq2seq_model
from selfattn.models.seq2seq_options import Seq2SeqConfig
from selfattn.models.task_model import TaskSpec

from ..helpers_models import with_options

FEATURES, TARGETS, LENGTH = 6, 10, 40
SPEECH = TaskSpec(task="seq2seq", num_labels=TARGETS, feature_dim=FEATURES, max_len=64)
SMALL = model_options(embed_dim=16, num_heads=2, num_layers=2, ffn_dim=32, dropout=0.0)


def _model(config: ModelOptions = SMALL, spec: TaskSpec = SPEECH) -> Seq2SeqTransformer:
    torch.manual_seed(0)
    return build_seq2seq_model(config, Seq2SeqConfig(decoder_layers=1), spec).eval()


def _memory(model: Seq2SeqTransformer, source: torch.Tensor) -> torch.Tensor:
    padding = torch.zeros(source.shape[:2], dtype=torch.bool)
    with torch.no_grad():
        return model.encode(source, padding).memory


@pytest.mark.parametrize("architecture", ["transformer", "conformer"])
def test_a_window_encoder_uses_the_window_kernel_and_sees_only_its_reach(
    architecture: str,
) -> None:
    window = 2
    conformer = {"architecture": "conformer", "window_k": 1} if architecture == "conformer" else {}
    config = with_options(SMALL, attention="window", attention_size=window, **conformer)
    model = _model(config)
    kernels = [m for m in model.encoder.modules() if isinstance(m, WindowKernel)]
    assert len(kernels) == SMALL.num_layers and all(k.window == window for k in kernels)
    assert any(".kernel" in name for name, _ in model.encoder.named_modules())
    assert not any(isinstance(m, WindowKernel) for m in model.decoder.modules())
    # Reach per layer: the window, plus (Conformer) the 3-wide convolution's ±1.
    reach = SMALL.num_layers * (window + (1 if architecture == "conformer" else 0))
    source = torch.randn(1, LENGTH, FEATURES)
    t = LENGTH // 2
    before = _memory(model, source)[0, t]
    distance = (torch.arange(LENGTH) - t).abs()
    for j in distance.gt(reach).nonzero().squeeze(1).tolist():  # far: no change at all
        changed = source.clone()
        changed[0, j] += 5.0
        torch.testing.assert_close(_memory(model, changed)[0, t], before, rtol=0, atol=0)
    # Near: each position within reach does reach t (the bound is tight).
    source.requires_grad_(True)
    padding = torch.zeros(1, LENGTH, dtype=torch.bool)
    model.encode(source, padding).memory[0, t].square().sum().backward()
    assert source.grad is not None
    seen = source.grad[0].abs().sum(-1) > 0
    assert torch.equal(seen, distance <= reach)


def test_a_dense_encoder_sees_the_whole_source() -> None:
    model = _model()
    source = torch.randn(1, LENGTH, FEATURES)
    changed = source.clone()
    changed[0, -1] += 5.0
    assert not torch.allclose(_memory(model, source)[0, 0], _memory(model, changed)[0, 0])


def test_a_conformer_encoder_reads_the_source() -> None:
    model = _model(with_options(SMALL, architecture="conformer", window_k=2))
    assert isinstance(model.encoder, Conformer) and model.encoder_kind == "conformer"
    blocks = list(model.encoder.layers)
    assert all(isinstance(b, ConformerBlock) and b.conv.kernel_size == 5 for b in blocks)
    source = torch.randn(2, 9, FEATURES)
    padding = torch.zeros(2, 9, dtype=torch.bool)
    padding[1, 6:] = True
    target = torch.full((2, 3), BOS_ID)
    out = model(source, padding, target)
    assert out.log_probs.shape == (2, 3, TARGETS)
    torch.testing.assert_close(out.log_probs.exp().sum(-1), torch.ones(2, 3))


def test_the_lecture_options_reach_the_seq2seq_encoder_and_decoder() -> None:
    config = replace(SMALL, score="dot", normalizer="sigmoid", include_self=False)
    model = _model(replace(config, share_weights=True))
    encoder_layers: list[Any] = list(model.encoder.layers)
    encoder_attention = encoder_layers[0].self_attn
    assert encoder_attention.score == "dot" and encoder_attention.normalizer == "sigmoid"
    assert not encoder_attention.include_self
    decoder_layers: list[Any] = list(model.decoder.layers)
    decoder_attention = decoder_layers[0].self_attn
    # The decoder reads the previous token at its own position: it keeps itself.
    assert decoder_attention.normalizer == "sigmoid" and decoder_attention.include_self
    assert encoder_layers[0] is encoder_layers[1]  # shared weights


@pytest.mark.parametrize("architecture", ["bigru", "fc", "cnn", "graph", "cnn2d"])
def test_architectures_without_attention_are_refused_in_one_line(architecture: str) -> None:
    with pytest.raises(ValueError, match=f"got '{architecture}'") as error:
        config = model_options(architecture=architecture, positional=None)  # type: ignore[arg-type]
        build_seq2seq_model(config, Seq2SeqConfig(), SPEECH)
    assert "\n" not in str(error.value)


def _inputs() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Sources of 7 and 4 frames, and target prefixes of BOS and three tokens."""
    padding = torch.zeros(2, 7, dtype=torch.bool)
    padding[1, 4:] = True
    target = torch.tensor([[BOS_ID, 5, 6, 7], [BOS_ID, 8, 9, 5]])
    return torch.randn(2, 7, FEATURES), padding, target


def _maps(model: Seq2SeqTransformer) -> tuple[Seq2SeqAttentionMaps, torch.Tensor]:
    source, padding, target = _inputs()
    return model.attention_maps(source, padding, target), padding


@pytest.mark.parametrize("architecture", ["transformer", "conformer"])
def test_seq2seq_maps_cover_the_encoder_the_decoder_and_cross_attention(
    architecture: str,
) -> None:
    maps, padding = _maps(_model(with_options(SMALL, architecture=architecture)))
    heads = SMALL.num_heads
    assert [m.shape for m in maps.encoder] == [(2, heads, 7, 7)] * 2
    assert [m.shape for m in maps.decoder] == [(2, heads, 4, 4)]
    assert [m.shape for m in maps.cross] == [(2, heads, 4, 7)]
    for weights in maps.encoder + maps.cross:
        assert float(weights.masked_select(padding[:, None, None, :]).abs().max()) == 0
    real = ~padding
    for weights in maps.encoder:
        sums = weights.sum(-1)
        torch.testing.assert_close(
            sums[real[:, None].expand_as(sums)], torch.ones(int(real.sum()) * heads)
        )
    for weights in maps.decoder + maps.cross:
        torch.testing.assert_close(weights.sum(-1), torch.ones(2, heads, 4))
    for weights in maps.decoder:
        assert float(weights.triu(diagonal=1).abs().max()) == 0  # causal: no future


def test_seq2seq_maps_are_the_weights_of_teacher_forcing() -> None:
    model = _model()
    source, padding, target = _inputs()
    maps = model.attention_maps(source, padding, target)
    out = model(source, padding, target, need_weights=True)
    assert out.cross_attentions is not None and out.self_attentions is not None
    torch.testing.assert_close(maps.cross[0], out.cross_attentions[0])
    torch.testing.assert_close(maps.decoder[0], out.self_attentions[0])


def test_a_kernel_without_weights_refuses_the_maps_in_one_line() -> None:
    model = _model(replace(SMALL, attention="linformer", attention_size=8))
    with pytest.raises(ValueError, match="linformer") as error:
        _maps(model)
    assert "\n" not in str(error.value)
