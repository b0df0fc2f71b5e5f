"""Performer / FAVOR+ (Choromanski et al. 2021): its features estimate the softmax kernel,
the error shrinks with more features, and causal/padding behave as in linear attention."""

from __future__ import annotations

import itertools
import math

import pytest
import torch

from selfattn.attention import attention
from selfattn.kernels import build_kernel
from selfattn.kernels.performer import PerformerKernel, favor_features, orthogonal_gaussian

from .helpers import assert_blind_to_the_future, poison_padding, random_qkv

B, H, L, D = 2, 2, 40, 8
F64 = torch.float64


def _qkv(length: int = L, scale: float = 0.5) -> tuple[torch.Tensor, ...]:
    # Moderate norms: FAVOR+'s variance grows like exp(|q + k|² / √D).
    return random_qkv(B, H, length, D, scale)


def test_orthogonal_blocks_with_gaussian_norms() -> None:
    w = orthogonal_gaussian(20, 8, generator=torch.Generator().manual_seed(0)).double()
    assert w.shape == (20, 8)
    for block in (w[:8], w[8:16], w[16:]):
        gram = block @ block.T
        off_diagonal = gram - torch.diag(torch.diagonal(gram))
        assert off_diagonal.abs().max() < 1e-5
    many = orthogonal_gaussian(4000, 8, generator=torch.Generator().manual_seed(1))
    assert abs(many.pow(2).sum(dim=1).mean().item() - 8) < 0.3  # E|w|² = D


def test_features_estimate_the_softmax_kernel() -> None:
    x, y = torch.randn(2, 1, 1, 1, D, dtype=F64) * 0.5
    w = orthogonal_gaussian(200_000, D, generator=torch.Generator().manual_seed(0)).double()
    # Unstabilised: both shifts are constants that a single product does not cancel.
    xs, ys = x * D**-0.25, y * D**-0.25
    phi_x = torch.exp(xs @ w.T - (xs * xs).sum(-1, keepdim=True) / 2)
    phi_y = torch.exp(ys @ w.T - (ys * ys).sum(-1, keepdim=True) / 2)
    estimate = (phi_x * phi_y).mean()
    assert math.isclose(estimate.item(), torch.exp((x * y).sum() / D**0.5).item(), rel_tol=0.02)


def test_error_decreases_with_more_features() -> None:
    q, k, v = _qkv(length=128)
    exact, _ = attention(q, k, v)
    errors = []
    for num_features in (16, 64, 256, 1024):
        per_seed = []
        for seed in range(4):
            kernel = PerformerKernel(head_dim=D, num_features=num_features, seed=seed).double()
            out = kernel(q, k, v)[0]
            per_seed.append(((out - exact).norm() / exact.norm()).item())
        errors.append(sum(per_seed) / len(per_seed))
    assert all(a > b for a, b in itertools.pairwise(errors)), errors
    assert errors[-1] < 0.5 * errors[0], errors


@pytest.mark.parametrize("causal", [False, True])
def test_matches_linear_attention_with_its_features(causal: bool) -> None:
    q, k, v = _qkv()
    kernel = PerformerKernel(head_dim=D, num_features=32, chunk_size=7).double()
    phi_q = favor_features(q, kernel.projection, is_query=True)
    phi_k = favor_features(k, kernel.projection, is_query=False)
    sim = phi_q @ phi_k.transpose(-1, -2)
    if causal:
        sim = sim.tril()
    expected = sim @ v / sim.sum(dim=-1, keepdim=True)
    torch.testing.assert_close(kernel(q, k, v, causal=causal)[0], expected, rtol=0, atol=1e-12)


def test_causal_output_ignores_the_future() -> None:
    qkv = _qkv()
    kernel = PerformerKernel(head_dim=D, num_features=64, chunk_size=8).double()
    assert_blind_to_the_future(kernel, qkv, t=25, key_noise=1.0)


@pytest.mark.parametrize("causal", [False, True])
def test_padded_keys_contribute_nothing(causal: bool) -> None:
    q, k, v = _qkv()
    pad = torch.zeros(B, L, dtype=torch.bool)
    pad[0, 30:] = True
    pad[1, 1::4] = True
    k2, v2 = poison_padding(k, v, pad, 50.0)  # 50 would dominate the stabilising max
    kernel = PerformerKernel(head_dim=D, num_features=64).double()
    out = kernel(q, k, v, key_padding_mask=pad, causal=causal)[0]
    out2 = kernel(q, k2, v2, key_padding_mask=pad, causal=causal)[0]
    torch.testing.assert_close(out, out2, rtol=0, atol=1e-12)
    # Padding at the end equals the shorter sequence.
    short = kernel(q[:1, :, :30], k[:1, :, :30], v[:1, :, :30], causal=causal)[0]
    torch.testing.assert_close(out[:1, :, :30], short, rtol=0, atol=1e-12)


def test_all_padded_gives_zero_and_finite_gradients() -> None:
    q, k, v = (t.requires_grad_() for t in _qkv(length=6))
    pad = torch.ones(B, 6, dtype=torch.bool)
    out = PerformerKernel(head_dim=D, num_features=16).double()(q, k, v, key_padding_mask=pad)[0]
    assert torch.all(out == 0)
    out.sum().backward()
    assert all(t.grad is not None and torch.isfinite(t.grad).all() for t in (q, k, v))


def test_features_are_seeded_saved_and_redrawn() -> None:
    a = PerformerKernel(head_dim=D, num_features=16, seed=3)
    b = PerformerKernel(head_dim=D, num_features=16, seed=3)
    torch.testing.assert_close(a.projection, b.projection)
    assert "projection" in a.state_dict()
    before = a.projection.clone()
    a.redraw()
    assert not torch.allclose(before, a.projection)


def test_float32_stays_finite_for_large_inputs() -> None:
    q, k, v = (20 * torch.randn(1, 1, 64, D) for _ in range(3))
    out = PerformerKernel(head_dim=D, num_features=64)(q, k, v)[0]
    assert torch.isfinite(out).all()


def test_build_needs_head_dim_and_rejects_unknown_options() -> None:
    kernel = build_kernel("performer", head_dim=D, num_features=32, max_len=1000)
    assert isinstance(kernel, PerformerKernel) and kernel.projection.shape == (32, D)
    assert PerformerKernel.size_option == "num_features"  # model.attention_size
    with pytest.raises(ValueError, match="needs head_dim"):
        build_kernel("performer")
    with pytest.raises(ValueError, match="takes no option 'features'"):
        build_kernel("performer", head_dim=D, features=32)
    with pytest.raises(ValueError, match="head_dim 8"):
        kernel(*(torch.randn(1, 1, 4, 16) for _ in range(3)))
