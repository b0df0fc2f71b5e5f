"""The one kernel protocol, over every registered kernel: each capability a kernel claims
works, each one it lacks is refused in one line that names the kernel and the capability;
attention weights, where a kernel gives them, are the matrix that multiplies V."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from selfattn.attention import MultiHeadAttention, attention
from selfattn.attention.cache import KVCache
from selfattn.kernels import (
    CAPABILITIES,
    KERNELS,
    AttentionKernel,
    Capability,
    DenseKernel,
)
from selfattn.kernels.nystrom import NystromKernel

from .helpers import SIZES, small_kernel

pytestmark = pytest.mark.usefixtures("one_thread")

B, H, L, D = 2, 3, 12, 8
F64 = torch.float64
#: Kernels whose weights are a distribution over the keys (softmax or normalised φ·φ);
#: Nyström's implied matrix need not be non-negative nor sum to 1.
DISTRIBUTIONS = {"dense", "window", "linear", "performer", "lsh"}


def _kernel(name: str) -> AttentionKernel:
    return small_kernel(name, D, L + 4)


def _qkv(
    queries: int = L, keys: int = L, kv_heads: int = H, seed: int = 0
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    q = torch.randn(B, H, queries, D, generator=generator, dtype=F64)
    k = torch.randn(B, kv_heads, keys, D, generator=generator, dtype=F64)
    v = torch.randn(B, kv_heads, keys, D, generator=generator, dtype=F64)
    return q, k, v


def _padding(length: int = L) -> torch.Tensor:
    pad = torch.zeros(B, length, dtype=torch.bool)
    pad[0, length - 3 :] = True
    pad[1, ::4] = True
    return pad


def _ask(kernel: AttentionKernel, capability: Capability) -> Any:
    """Call ``kernel`` asking for ``capability`` and nothing else it might lack."""
    if capability == "cache":  # the cache belongs to MultiHeadAttention, which asks
        module = MultiHeadAttention(H * D, H, kernel=kernel).double().eval()
        x = torch.randn(B, 1, H * D, dtype=F64)
        return module(x, cache=KVCache())
    if capability == "cross":
        q, k, v = _qkv(queries=L - 4)
        return kernel(q, k, v)
    if capability == "gqa":
        q, k, v = _qkv(kv_heads=1)
        return kernel(q, k, v)
    request: dict[str, Any] = {
        "causal": {"causal": True},
        "mask": {"mask": torch.ones(L, L, dtype=torch.bool)},
        "window": {"window": 2},
        "weights": {"need_weights": True},
        "scores": {"normalizer": "relu"},
    }[capability]
    return kernel(*_qkv(), **request)


MISSING = [
    (name, capability)
    for name in sorted(KERNELS)
    for capability in CAPABILITIES
    if not KERNELS[name].supports(capability)
]
CLAIMED = [
    (name, capability)
    for name in sorted(KERNELS)
    for capability in CAPABILITIES
    if KERNELS[name].supports(capability)
]


@pytest.mark.parametrize(("name", "capability"), MISSING)
def test_every_missing_capability_is_refused_in_one_line(name: str, capability: Capability) -> None:
    with pytest.raises(ValueError) as refusal:
        _ask(_kernel(name), capability)
    message = str(refusal.value)
    assert "\n" not in message
    assert message.startswith(f"attention kernel {name!r} cannot {CAPABILITIES[capability]}: ")
    assert len(message) > len(f"attention kernel {name!r} cannot {CAPABILITIES[capability]}: ")


@pytest.mark.parametrize(("name", "capability"), CLAIMED)
def test_every_claimed_capability_is_accepted(name: str, capability: Capability) -> None:
    out, _ = _ask(_kernel(name), capability)
    assert torch.isfinite(out).all()


def test_the_dense_kernel_supports_everything_and_the_flags_are_checked() -> None:
    assert all(DenseKernel.supports(c) for c in CAPABILITIES)
    with pytest.raises(ValueError, match="unknown capability 'colour'"):
        DenseKernel.supports("colour")  # type: ignore[arg-type]


def test_linformer_says_why_it_has_no_weights() -> None:
    with pytest.raises(ValueError) as refusal:
        _kernel("linformer")(*_qkv(), need_weights=True)
    assert str(refusal.value) == (
        "attention kernel 'linformer' cannot return attention weights: "
        "it attends over 16 projected keys, not over positions"
    )


# --------------------------------------------------------------------------- weights

WEIGHT_CASES = [
    (name, causal)
    for name in sorted(KERNELS)
    if KERNELS[name].supports_weights
    for causal in ((False, True) if KERNELS[name].supports_causal else (False,))
]


@pytest.mark.parametrize(("name", "causal"), WEIGHT_CASES)
def test_weights_times_values_is_the_output(name: str, causal: bool) -> None:
    """The weights a kernel returns are the (B, H, T, S) matrix that multiplies V: exact
    for dense and window, the implied one for the approximations; padded keys (holding
    anything finite) and, when causal, later keys get weight exactly 0."""
    kernel = _kernel(name)
    q, k, v = _qkv()
    pad = _padding()
    out, weights = kernel(q, k, v, key_padding_mask=pad, causal=causal, need_weights=True)
    plain, none = kernel(q, k, v, key_padding_mask=pad, causal=causal)
    assert none is None and weights is not None
    assert weights.shape == (B, H, L, L)
    torch.testing.assert_close(weights @ v, out, rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(out, plain, rtol=1e-10, atol=1e-12)
    assert torch.all(weights.masked_select(pad[:, None, None, :]) == 0)
    if causal:
        assert torch.all(weights.triu(diagonal=1) == 0)
    if name in DISTRIBUTIONS:
        real = ~pad[:, None, :].expand(B, H, L)  # self-attention: real queries have a key
        assert torch.all(weights >= 0)
        torch.testing.assert_close(weights.sum(-1)[real], torch.ones(B, H, L, dtype=F64)[real])


@pytest.mark.parametrize("causal", [False, True])
def test_window_weights_are_the_banded_dense_weights(causal: bool) -> None:
    kernel = _kernel("window")
    q, k, v = _qkv()
    pad = _padding()
    _, weights = kernel(q, k, v, key_padding_mask=pad, causal=causal, need_weights=True)
    _, expected = attention(
        q, k, v, key_padding_mask=pad, causal=causal, window=SIZES["window"], need_weights=True
    )
    assert weights is not None and expected is not None
    torch.testing.assert_close(weights, expected, rtol=0, atol=0)
    i, j = torch.arange(L)[:, None], torch.arange(L)[None, :]
    assert torch.all(weights[..., (i - j).abs() > SIZES["window"]] == 0)


def test_window_at_call_time_narrows_the_kernels_band() -> None:
    q, k, v = _qkv()
    pad = _padding()
    out, _ = _kernel("window")(q, k, v, key_padding_mask=pad, window=1)
    expected, _ = attention(q, k, v, key_padding_mask=pad, window=1)
    torch.testing.assert_close(out, expected)
    wider, _ = _kernel("window")(q, k, v, key_padding_mask=pad, window=50)
    torch.testing.assert_close(wider, attention(q, k, v, key_padding_mask=pad, window=3)[0])


def test_nystrom_weights_include_the_convolution_band() -> None:
    kernel = NystromKernel(num_landmarks=4, conv_kernel_size=3, num_heads=H).double()
    q, k, v = _qkv()
    pad = _padding()
    out, weights = kernel(q, k, v, key_padding_mask=pad, need_weights=True)
    assert weights is not None
    torch.testing.assert_close(weights @ v, out, rtol=1e-10, atol=1e-12)
    assert torch.all(weights.masked_select(pad[:, None, None, :]) == 0)


def test_weights_are_formed_only_when_asked_for(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without need_weights the linear kernels never build the (T, S) implied matrix."""
    import selfattn.kernels.linear as linear

    def forbidden(*args: object, **kwargs: object) -> torch.Tensor:
        raise AssertionError("the implied matrix was formed without being asked for")

    monkeypatch.setattr(linear, "linear_attention_weights", forbidden)
    for name in ("linear", "performer"):
        _kernel(name)(*_qkv(), causal=True)
        with pytest.raises(AssertionError, match="without being asked"):
            _kernel(name)(*_qkv(), need_weights=True)


# --------------------------------------------------------------------------- cache


@pytest.mark.parametrize("name", sorted(n for n in KERNELS if KERNELS[n].supports_cache))
def test_kernels_with_a_cache_decode_step_by_step_as_they_attend_causally(name: str) -> None:
    torch.manual_seed(0)
    module = MultiHeadAttention(H * D, H, kernel=_kernel(name)).double().eval()
    x = torch.randn(B, L, H * D, dtype=F64)
    full, _ = module(x, causal=True)
    cache = KVCache()
    steps = [module(x[:, :3], cache=cache, causal=True)[0]]  # a prompt, then one at a time
    steps += [module(x[:, t : t + 1], cache=cache, causal=True)[0] for t in range(3, L)]
    torch.testing.assert_close(torch.cat(steps, dim=1), full, rtol=1e-9, atol=1e-10)
