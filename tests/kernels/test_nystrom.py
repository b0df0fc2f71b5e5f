"""Nyströmformer (Xiong et al. 2021): exact with one landmark per token, better with more
landmarks, and blind to padding."""

from __future__ import annotations

import itertools

import pytest
import torch

from selfattn.attention import attention
from selfattn.kernels import build_kernel
from selfattn.kernels.nystrom import NystromKernel, iterative_pinv, segment_means

from .helpers import random_qkv

B, H, L, D = 2, 2, 48, 8
F64 = torch.float64


def _qkv(length: int = L, scale: float = 0.7) -> tuple[torch.Tensor, ...]:
    return random_qkv(B, H, length, D, scale)


def test_segment_means_skip_padding() -> None:
    x = torch.arange(10, dtype=F64).reshape(1, 1, 10, 1)
    pad = torch.zeros(1, 10, dtype=torch.bool)
    pad[0, 4] = True
    pad[0, 5:] = True
    means, empty = segment_means(x, 3, pad)  # segments {0,1,2,3}, {4,5,6}, {7,8,9}
    torch.testing.assert_close(means.flatten(), torch.tensor([1.5, 0.0, 0.0], dtype=F64))
    assert empty.tolist() == [[False, True, True]]


def test_iterative_pinv_converges_to_the_inverse() -> None:
    a = torch.softmax(torch.randn(3, 10, 10, dtype=F64), dim=-1)
    torch.testing.assert_close(iterative_pinv(a, 40), torch.linalg.inv(a))


def test_one_landmark_per_token_is_exact() -> None:
    q, k, v = _qkv()
    exact, _ = attention(q, k, v)
    out = NystromKernel(num_landmarks=L, pinv_iterations=60)(q, k, v)[0]
    torch.testing.assert_close(out, exact, rtol=0, atol=1e-8)


def test_error_decreases_with_more_landmarks() -> None:
    samples = [_qkv() for _ in range(3)]
    errors = []
    for landmarks in (4, 8, 16, 48):
        kernel = NystromKernel(num_landmarks=landmarks)  # the paper's 6 iterations
        per_sample = []
        for q, k, v in samples:
            exact, _ = attention(q, k, v)
            per_sample.append(((kernel(q, k, v)[0] - exact).norm() / exact.norm()).item())
        errors.append(sum(per_sample) / len(per_sample))
    assert all(a > b for a, b in itertools.pairwise(errors)), errors


def test_padding_is_ignored_and_exact_with_one_landmark_per_token() -> None:
    q, k, v = _qkv()
    pad = torch.zeros(B, L, dtype=torch.bool)
    pad[0, 40:] = True
    pad[1, 5::4] = True
    q2, k2, v2 = q.clone(), k.clone(), v.clone()
    for t in (q2, k2, v2):
        t[pad[:, None].expand(B, H, L)] = float("nan")
    kernel = NystromKernel(num_landmarks=L, pinv_iterations=60)
    out = kernel(q2, k2, v2, key_padding_mask=pad)[0]
    exact, _ = attention(q, k, v, key_padding_mask=pad)
    real = ~pad[:, None, :, None].expand_as(out)
    torch.testing.assert_close(out[real], exact[real], rtol=0, atol=1e-8)
    # Fewer landmarks than tokens: still independent of what the padding holds.
    kernel = NystromKernel(num_landmarks=8)
    torch.testing.assert_close(
        kernel(q, k, v, key_padding_mask=pad)[0][real],
        kernel(q2, k2, v2, key_padding_mask=pad)[0][real],
    )


def test_cross_attention_and_finite_gradients() -> None:
    q = torch.randn(B, H, 20, D, dtype=F64, requires_grad=True)
    k, v = (torch.randn(B, H, 30, D, dtype=F64, requires_grad=True) for _ in range(2))
    pad = torch.zeros(B, 30, dtype=torch.bool)
    pad[1, 12:] = True
    out = NystromKernel(num_landmarks=5)(q, k, v, key_padding_mask=pad)[0]
    assert out.shape == (B, H, 20, D)
    out.sum().backward()
    assert all(t.grad is not None and torch.isfinite(t.grad).all() for t in (q, k, v))


def test_convolution_skip() -> None:
    q, k, v = _qkv()
    kernel = NystromKernel(num_landmarks=8, conv_kernel_size=5, num_heads=H).double()
    plain = NystromKernel(num_landmarks=8)(q, k, v)[0]
    assert kernel.conv is not None
    torch.testing.assert_close(kernel(q, k, v)[0] - plain, kernel.conv(v))
    with pytest.raises(ValueError, match="needs num_heads"):
        NystromKernel(conv_kernel_size=5)


def test_options_are_checked() -> None:
    q, k, v = _qkv(8)
    with pytest.raises(
        ValueError, match=r"^attention kernel 'nystrom' cannot attend causally: [^\n]+$"
    ):
        NystromKernel()(q, k, v, causal=True)
    kernel = build_kernel("nystrom", num_landmarks=16, head_dim=D, max_len=100)
    assert isinstance(kernel, NystromKernel) and kernel.num_landmarks == 16
    assert NystromKernel.size_option == "num_landmarks"  # model.attention_size
    with pytest.raises(ValueError, match="takes no option 'landmarks'"):
        build_kernel("nystrom", landmarks=16)
