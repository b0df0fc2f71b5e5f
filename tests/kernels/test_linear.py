"""Linear attention (Katharopoulos et al. 2020): the formula, and its three causal forms —
RNN steps, chunked prefix sums, the explicit masked sum — agreeing in float64."""

from __future__ import annotations

import pytest
import torch

from selfattn.kernels import build_kernel
from selfattn.kernels.linear import (
    LinearKernel,
    causal_linear_attention,
    elu_feature_map,
    linear_attention,
)

from .helpers import assert_blind_to_the_future, poison_padding

B, H, L, D, DV = 2, 3, 37, 5, 4
F64 = torch.float64


def _qkv(length: int = L) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    q, k = torch.randn(2, B, H, length, D, dtype=F64)
    return q, k, torch.randn(B, H, length, DV, dtype=F64)


def _explicit(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    causal: bool,
    pad: torch.Tensor | None = None,
) -> torch.Tensor:
    """out_i = Σ_j φ(q_i)ᵀφ(k_j) v_j / Σ_j φ(q_i)ᵀφ(k_j), over the allowed j, pair by pair."""
    sim = elu_feature_map(q) @ elu_feature_map(k).transpose(-1, -2)  # (B, H, T, S)
    if causal:
        sim = sim.tril(diagonal=k.shape[2] - q.shape[2])
    if pad is not None:
        sim = sim.masked_fill(pad[:, None, None, :], 0.0)
    total = sim.sum(dim=-1, keepdim=True)
    return (sim @ v) / torch.where(total > 0, total, 1.0)  # no visible key: 0


@pytest.mark.parametrize("causal", [False, True])
def test_matches_the_explicit_formula(causal: bool) -> None:
    q, k, v = _qkv()
    out = LinearKernel()(q, k, v, causal=causal)[0]
    torch.testing.assert_close(out, _explicit(q, k, v, causal), rtol=0, atol=1e-12)


@pytest.mark.parametrize("chunk_size", [1, 4, 7, 36, 37, 64])
def test_recurrent_equals_chunked_causal(chunk_size: int) -> None:
    q, k, v = _qkv()
    kernel = LinearKernel(chunk_size=chunk_size)
    parallel = kernel(q, k, v, causal=True)[0]
    recurrent = kernel.recurrent(q, k, v)
    torch.testing.assert_close(parallel, recurrent, rtol=0, atol=1e-12)
    torch.testing.assert_close(parallel, _explicit(q, k, v, causal=True), rtol=0, atol=1e-12)


def test_step_by_step_state_is_the_prefix_sum() -> None:
    q, k, v = _qkv(length=6)
    kernel = LinearKernel()
    state = kernel.initial_state(q, v)
    for t in range(6):
        _, state = kernel.step(q[:, :, t], k[:, :, t], v[:, :, t], state)
    phi_k = elu_feature_map(k)
    torch.testing.assert_close(state.s, phi_k.transpose(-1, -2) @ v)
    torch.testing.assert_close(state.z, phi_k.sum(dim=2))


def test_causal_with_fewer_queries_is_bottom_right_aligned() -> None:
    q, k, v = _qkv()
    out = causal_linear_attention(
        elu_feature_map(q[:, :, -10:]), elu_feature_map(k), v, chunk_size=4
    )
    full = LinearKernel()(q, k, v, causal=True)[0]
    torch.testing.assert_close(out, full[:, :, -10:], rtol=0, atol=1e-12)


def test_causal_output_ignores_the_future() -> None:
    assert_blind_to_the_future(LinearKernel(chunk_size=8), _qkv(), t=20)


@pytest.mark.parametrize("causal", [False, True])
def test_padded_keys_contribute_nothing(causal: bool) -> None:
    q, k, v = _qkv()
    pad = torch.zeros(B, L, dtype=torch.bool)
    pad[0, 30:] = True
    pad[1, ::3] = True
    k2, v2 = poison_padding(k, v, pad, 100.0)
    kernel = LinearKernel(chunk_size=8)
    out = kernel(q, k, v, key_padding_mask=pad, causal=causal)[0]
    torch.testing.assert_close(out, kernel(q, k2, v2, key_padding_mask=pad, causal=causal)[0])
    torch.testing.assert_close(out, _explicit(q, k, v, causal, pad), rtol=0, atol=1e-12)
    if causal:
        recurrent = kernel.recurrent(q, k2, v2, key_padding_mask=pad)
        torch.testing.assert_close(out, recurrent, rtol=0, atol=1e-12)


def test_no_visible_key_gives_zero_and_finite_gradients() -> None:
    q, k, v = (t.requires_grad_() for t in _qkv(length=8))
    pad = torch.zeros(B, 8, dtype=torch.bool)
    pad[0] = True  # nothing at all
    pad[1, :3] = True  # causal: the first three queries see nothing
    for causal in (False, True):
        out = LinearKernel(chunk_size=3)(q, k, v, key_padding_mask=pad, causal=causal)[0]
        assert torch.all(out[0] == 0)
        if causal:
            assert torch.all(out[1, :, :3] == 0)
        out.sum().backward()
        assert all(t.grad is not None and torch.isfinite(t.grad).all() for t in (q, k, v))


def test_feature_map_is_elu_plus_one_and_positive() -> None:
    x = torch.linspace(-10, 10, 101, dtype=F64)
    torch.testing.assert_close(elu_feature_map(x), torch.nn.functional.elu(x) + 1)
    assert torch.all(elu_feature_map(torch.tensor([-50.0, -1.0, 0.0, 3.0])) > 0)


def test_linear_attention_takes_any_features() -> None:
    phi_q, phi_k = torch.rand(2, B, H, L, 7, dtype=F64)
    v = torch.randn(B, H, L, DV, dtype=F64)
    sim = phi_q @ phi_k.transpose(-1, -2)
    expected = sim.tril() @ v / sim.tril().sum(dim=-1, keepdim=True)
    out = linear_attention(phi_q, phi_k, v, causal=True, chunk_size=5)
    torch.testing.assert_close(out, expected, rtol=0, atol=1e-12)


def test_build_by_name_and_unknown_option() -> None:
    kernel = build_kernel("linear", chunk_size=16, head_dim=8, max_len=100)
    assert isinstance(kernel, LinearKernel) and kernel.chunk_size == 16
    with pytest.raises(ValueError, match="takes no option 'window'"):
        build_kernel("linear", window=4)
    with pytest.raises(ValueError, match="chunk_size"):
        LinearKernel(chunk_size=0)
