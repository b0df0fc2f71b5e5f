"""Conformer block and stack: shapes, padding, receptive field, causality, training."""

from __future__ import annotations

import pytest
import torch

from selfattn.attention import padding_mask
from selfattn.blocks import BlockConfig
from selfattn.blocks.conformer import (
    ConformerBlock,
    ConvNormName,
    ConvolutionModule,
    MaskedBatchNorm1d,
)
from selfattn.kernels import build_kernel
from selfattn.models import StackConfig
from selfattn.models.conformer import Conformer

B, L, E, H, FFN, K = 2, 12, 16, 4, 32, 5


def _block(kernel: torch.nn.Module | None = None) -> ConformerBlock:
    return ConformerBlock(BlockConfig(E, H, FFN, conv_kernel_size=K), kernel=kernel)


def _stack(num_layers: int, **options: object) -> Conformer:
    return Conformer(StackConfig(E, H, FFN, conv_kernel_size=K, num_layers=num_layers, **options))  # type: ignore[arg-type]


def _randomise_batch_norms(module: torch.nn.Module) -> None:
    """Non-trivial running statistics and affine weights, so eval mode is a real test."""
    with torch.no_grad():
        for norm in module.modules():
            if isinstance(norm, MaskedBatchNorm1d):
                norm.running_mean.normal_()
                norm.running_var.uniform_(0.5, 2.0)
                norm.weight.normal_(1.0, 0.3)
                norm.bias.normal_(0.0, 0.3)


def test_block_and_stack_keep_shape() -> None:
    x = torch.randn(B, L, E)
    out, weights = _block()(x, need_weights=True)
    assert out.shape == (B, L, E)
    assert weights is not None and weights.shape == (B, H, L, L)
    stack = _stack(3, positional="sinusoidal")
    result = stack(x, need_weights=True)
    assert result.last_hidden_state.shape == (B, L, E)
    assert len(result.hidden_states) == 4 and result.attentions is not None
    assert len(result.attentions) == 3


@pytest.mark.parametrize("conv_norm", ["batch", "layer"])
@pytest.mark.parametrize("train", [False, True])
def test_padding_never_reaches_real_positions(conv_norm: ConvNormName, train: bool) -> None:
    # Batch norm counts real frames only, so even training-mode statistics ignore padding.
    stack = _stack(2, conv_norm=conv_norm, positional="rotary")
    _randomise_batch_norms(stack)
    stack.train(train)
    lengths = torch.tensor([L, 7])
    pad = padding_mask(lengths, L)
    x = torch.randn(B, L, E)
    noisy = x.clone()
    noisy[pad] = 100 * torch.randn(int(pad.sum()), E)
    out = stack(x, key_padding_mask=pad).last_hidden_state
    out_noisy = stack(noisy, key_padding_mask=pad).last_hidden_state
    real = ~pad
    torch.testing.assert_close(out[real], out_noisy[real])
    # Nor does the amount of padding (which plain batch norm would average in).
    longer = torch.cat([x, torch.randn(B, 5, E)], dim=1)
    out_longer = stack(longer, key_padding_mask=padding_mask(lengths, L + 5)).last_hidden_state
    torch.testing.assert_close(out_longer[:, :L][real], out[real], rtol=1e-4, atol=1e-5)
    if not train:  # eval: a padded sequence gives what it gives alone, unpadded
        alone = stack(x[1:, :7]).last_hidden_state
        torch.testing.assert_close(out[1, :7], alone[0], rtol=1e-4, atol=1e-5)


def test_masked_batch_norm_statistics_are_the_real_frames() -> None:
    norm = MaskedBatchNorm1d(3, momentum=1.0)  # running stats = the last batch's
    x = torch.randn(2, 3, 6)
    pad = padding_mask(torch.tensor([6, 2]), 6)
    norm(x, pad)
    real = x.transpose(1, 2)[~pad]  # (8, 3)
    torch.testing.assert_close(norm.running_mean, real.mean(0))
    torch.testing.assert_close(norm.running_var, real.var(0))


def _dependence(model: torch.nn.Module, x: torch.Tensor, position: int) -> torch.Tensor:
    """Which input positions the output at ``position`` depends on: ``(L,)`` boolean."""
    x = x.clone().requires_grad_(True)
    out = model(x)
    out = out.last_hidden_state if hasattr(out, "last_hidden_state") else out
    out = out[0] if isinstance(out, tuple) else out
    # A random read-out: the plain sum of a LayerNorm's output is constant (zero gradient).
    probe = torch.randn(out.shape[-1], generator=torch.Generator().manual_seed(1))
    (out[:, position] @ probe).sum().backward()
    assert x.grad is not None
    return x.grad.abs().sum(dim=(0, 2)) > 0


@pytest.mark.parametrize("num_layers", [1, 2])
def test_window_attention_bounds_the_receptive_field(num_layers: int) -> None:
    window, length, i = 2, 40, 20
    # Per layer: attention reaches ±window, the depthwise convolution ±K // 2 (odd K);
    # the feed-forward modules and norms act per frame (eval: batch norm is per frame too).
    reach = num_layers * (window + K // 2)
    stack = _stack(num_layers, attention="window", attention_options={"window": window}).eval()
    seen = _dependence(stack, torch.randn(1, length, E), i)
    distance = (torch.arange(length) - i).abs()
    assert not seen[distance > reach].any()
    assert seen[distance <= reach].all()  # and the bound is reached on both sides


def test_block_takes_a_window_kernel() -> None:
    block = _block(kernel=build_kernel("window", window=1)).eval()
    seen = _dependence(block, torch.randn(1, 20, E), 10)
    assert seen.nonzero().squeeze(1).tolist() == list(range(10 - 3, 10 + 4))  # 1 + K // 2


def test_convolution_sees_neighbours_within_half_the_kernel() -> None:
    conv = ConvolutionModule(E, K).eval()
    _randomise_batch_norms(conv)
    seen = _dependence(conv, torch.randn(1, 15, E), 7)
    assert seen.nonzero().squeeze(1).tolist() == list(range(7 - K // 2, 7 + K // 2 + 1))
    x = torch.randn(1, 15, E)
    changed = x.clone()
    changed[0, 7 + K // 2] = torch.randn(E)  # the farthest neighbour the filter reaches
    assert not torch.allclose(conv(x)[0, 7], conv(changed)[0, 7])


def test_even_kernel_reaches_one_more_frame_ahead() -> None:
    conv = ConvolutionModule(E, 4).eval()
    assert _dependence(conv, torch.randn(1, 15, E), 7).nonzero().squeeze(1).tolist() == [
        6,
        7,
        8,
        9,
    ]


@pytest.mark.parametrize("attention", ["dense", "window"])
def test_causal_sees_only_the_past(attention: str) -> None:
    options = {"window": 3} if attention == "window" else {}
    stack = _stack(2, attention=attention, attention_options=options).eval()
    x = torch.randn(1, L, E)
    seen = _dependence(lambda t: stack(t, causal=True), x, 5)  # type: ignore[arg-type]
    assert not seen[6:].any() and seen[:6].any()


def test_training_step_gives_finite_gradients() -> None:
    stack = _stack(2, dropout=0.1, positional="relative")
    optimiser = torch.optim.AdamW(stack.parameters(), lr=1e-3)
    pad = padding_mask(torch.tensor([L, 5]), L)
    out = stack(torch.randn(B, L, E), key_padding_mask=pad).last_hidden_state
    loss = out[~pad].square().mean()
    loss.backward()
    for name, parameter in stack.named_parameters():
        assert parameter.grad is not None, name
        assert torch.isfinite(parameter.grad).all(), name
    before = [p.detach().clone() for p in stack.parameters()]
    optimiser.step()
    assert any(not torch.equal(a, p) for a, p in zip(before, stack.parameters(), strict=True))


def test_bad_options_are_one_line_errors() -> None:
    with pytest.raises(ValueError, match="conv_kernel_size"):
        ConformerBlock(BlockConfig(E, H, FFN, conv_kernel_size=0))
    with pytest.raises(ValueError, match="conv_norm"):
        ConformerBlock(BlockConfig(E, H, FFN, conv_norm="group"))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="divisible"):
        Conformer(StackConfig(E, 3, FFN, num_layers=1))


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"kernel_size": 0}, "conv_kernel_size must be >= 1, got 0"),
        ({"norm": "group"}, "conv_norm must be 'batch' or 'layer', got 'group'"),
    ],
)
def test_convolution_module_refuses_what_the_config_refuses(
    options: dict[str, object], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        ConvolutionModule(E, **options)  # type: ignore[arg-type]
