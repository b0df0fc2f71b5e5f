"""Cordonnier et al. (2020), Theorem 1: self-attention with K² heads reproduces a K×K conv."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from selfattn import MultiHeadAttention
from selfattn.positional.grid import Relative2DBias
from selfattn.vision import ConvAsAttention, attention_from_conv

SIZES = [(1, 1), (4, 4), (5, 7), (6, 3)]


@pytest.mark.parametrize(
    ("kernel", "padding"),
    [(3, 1), (1, 0), (5, 2), (3, "same"), (2, "same"), ((3, 5), (1, 2))],
)
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.filterwarnings("ignore:Using padding='same' with even kernel")  # torch's own note
def test_attention_equals_convolution(
    kernel: int | tuple[int, int], padding: int | str | tuple[int, int], bias: bool
) -> None:
    torch.manual_seed(2)
    conv = nn.Conv2d(3, 4, kernel, padding=padding, bias=bias).double()
    attn = attention_from_conv(conv)
    assert isinstance(attn.attention, MultiHeadAttention)
    k_h, k_w = conv.kernel_size
    assert attn.attention.num_heads == k_h * k_w
    assert attn.attention.head_dim == 3
    for height, width in SIZES:
        image = torch.randn(2, 3, height, width, dtype=torch.float64)
        torch.testing.assert_close(attn(image), conv(image), rtol=0, atol=1e-10)


def test_same_channel_count_keeps_the_ordinary_output_projection() -> None:
    conv = nn.Conv2d(4, 4, 3, padding=1).double()
    attn = attention_from_conv(conv)
    assert attn.attention.out_proj.out_features == attn.attention.embed_dim == 4
    image = torch.randn(1, 4, 5, 6, dtype=torch.float64)
    torch.testing.assert_close(attn(image), conv(image), rtol=0, atol=1e-10)


def test_gradients_match_the_convolution() -> None:
    conv = nn.Conv2d(2, 3, 3, padding=1).double()
    attn = attention_from_conv(conv)
    image = torch.randn(2, 2, 4, 5, dtype=torch.float64, requires_grad=True)
    (grad_attn,) = torch.autograd.grad(attn(image).square().sum(), image)
    (grad_conv,) = torch.autograd.grad(conv(image).square().sum(), image)
    torch.testing.assert_close(grad_attn, grad_conv, rtol=0, atol=1e-10)


def test_each_head_attends_to_exactly_one_offset() -> None:
    """The score is purely positional: one allowed key per head, at its kernel offset."""
    attn = attention_from_conv(nn.Conv2d(1, 1, 3, padding=1))
    bias = attn.relative(4, 5)  # (9, 20, 20)
    allowed = torch.isfinite(bias)
    query = 1 * 5 + 2  # pixel (1, 2), interior: every head has its key
    keys = allowed[:, query].nonzero()[:, 1]
    expected = [(1 + a - 1) * 5 + (2 + b - 1) for a in range(3) for b in range(3)]
    assert keys.tolist() == expected
    corner = allowed[:, 0].sum(dim=-1)  # pixel (0, 0): only offsets (0|1, 0|1) exist
    assert corner.tolist() == [0, 0, 0, 0, 1, 1, 0, 1, 1]


def test_works_in_float32() -> None:
    conv = nn.Conv2d(3, 2, 3, padding=1)
    image = torch.randn(2, 3, 6, 6)
    torch.testing.assert_close(attention_from_conv(conv)(image), conv(image))


@pytest.mark.parametrize(
    ("conv", "message"),
    [
        (nn.Conv2d(2, 2, 3, padding=1, stride=2), "stride"),
        (nn.Conv2d(2, 2, 3, padding=2, dilation=2), "dilation"),
        (nn.Conv2d(2, 2, 3, padding=1, groups=2), "groups"),
        (nn.Conv2d(2, 2, 3, padding=1, padding_mode="circular"), "padding_mode"),
        (nn.Conv2d(2, 2, 3, padding=0), "'same' zero padding"),
        (nn.Conv2d(2, 2, 2, padding=1), "'same' zero padding"),
    ],
)
def test_unsupported_convolutions_are_refused(conv: nn.Conv2d, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        attention_from_conv(conv)


def test_input_and_wiring_errors() -> None:
    attn = attention_from_conv(nn.Conv2d(3, 2, 3, padding=1))
    with pytest.raises(ValueError, match="expects 3 channels"):
        attn(torch.randn(1, 2, 4, 4))
    with pytest.raises(ValueError, match="4 heads but the attention has 9"):
        ConvAsAttention(attn.attention, Relative2DBias(4, 3, 3))
    with pytest.raises(TypeError, match=r"nn\.Conv2d"):
        attention_from_conv(nn.Conv1d(2, 2, 3))  # type: ignore[arg-type]
