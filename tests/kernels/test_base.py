"""The kernel interface: registry, the dense kernel, and kernels inside MultiHeadAttention,
the encoder and the model config. (Capabilities over every kernel: test_capabilities.)"""

from __future__ import annotations

import pytest
import torch

from selfattn import MultiHeadAttention
from selfattn.attention import attention
from selfattn.attention.cache import KVCache
from selfattn.bench import measure_memory
from selfattn.kernels import (
    KERNELS,
    AttentionKernel,
    AttentionRequest,
    DenseKernel,
    build_kernel,
    register_kernel,
)
from selfattn.models import Encoder, StackConfig
from selfattn.models.registry import model_options

from .helpers import small_kernel


def _qkv(length: int = 9, seed: int = 0) -> tuple[torch.Tensor, ...]:
    generator = torch.Generator().manual_seed(seed)
    return tuple(
        torch.randn(2, 3, length, 8, generator=generator, dtype=torch.float64) for _ in "qkv"
    )


def test_dense_kernel_is_the_attention_function() -> None:
    q, k, v = _qkv()
    padding = torch.zeros(2, 9, dtype=torch.bool)
    padding[1, 6:] = True
    for causal in (False, True):
        expected, _ = attention(q, k, v, key_padding_mask=padding, causal=causal)
        got, weights = DenseKernel()(q, k, v, key_padding_mask=padding, causal=causal)
        assert weights is None
        torch.testing.assert_close(got, expected, rtol=0, atol=0)
        reference = DenseKernel().reference(q, k, v, key_padding_mask=padding, causal=causal)
        torch.testing.assert_close(reference, got)


def test_dense_kernel_takes_every_option_of_the_attention_function() -> None:
    """One call for the lecture's whole formula: masks, window, scores, weights, grouped
    heads, and dropout (the kernel's own, in training only)."""
    q, k, v = _qkv()
    options = {
        "mask": torch.randn(9, 9, dtype=torch.float64),
        "window": 3,
        "score": "dot",
        "normalizer": "sigmoid",
        "include_self": False,
        "need_weights": True,
    }
    expected, expected_weights = attention(q, k, v, **options)  # type: ignore[arg-type]
    got, weights = DenseKernel(dropout=0.5).eval()(q, k, v, **options)  # type: ignore[arg-type]
    torch.testing.assert_close(got, expected, rtol=0, atol=0)
    torch.testing.assert_close(weights, expected_weights, rtol=0, atol=0)
    grouped, _ = DenseKernel()(q, k[:, :1], v[:, :1], causal=True)
    torch.testing.assert_close(grouped, attention(q, k[:, :1], v[:, :1], causal=True)[0])
    dropped, _ = DenseKernel(dropout=0.5).train()(q, k, v)
    assert not torch.allclose(dropped, attention(q, k, v)[0])
    with pytest.raises(ValueError, match=r"dropout must be in \[0, 1\)"):
        DenseKernel(dropout=1.0)


def test_registry_and_builder_errors() -> None:
    assert KERNELS["dense"] is DenseKernel
    with pytest.raises(ValueError, match="unknown attention kernel 'nope'; choose one of"):
        build_kernel("nope")
    with pytest.raises(ValueError, match="takes no option 'window'"):
        build_kernel("dense", window=3)
    assert isinstance(build_kernel("dense", head_dim=8, max_len=99), DenseKernel)

    class Clash(AttentionKernel):
        name = "dense"

    with pytest.raises(ValueError, match="already registered"):
        register_kernel(Clash)


def test_kernel_input_errors() -> None:
    q, k, v = _qkv()
    with pytest.raises(ValueError, match=r"q must have shape \(B, H, L, D\)"):
        DenseKernel()(q[0], k, v)
    with pytest.raises(TypeError, match="share a dtype"):
        DenseKernel()(q.float(), k, v)
    with pytest.raises(ValueError, match=r"key_padding_mask must have shape \(B, S\)"):
        DenseKernel()(q, k, v, key_padding_mask=torch.zeros(2, 4, dtype=torch.bool))

    class NoCausal(AttentionKernel):
        name = "test-no-causal"

        def attend(
            self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, request: AttentionRequest
        ) -> tuple[torch.Tensor, torch.Tensor | None]:
            return v, None

    with pytest.raises(ValueError, match="'test-no-causal' cannot attend causally: it has no"):
        NoCausal()(q, k, v, causal=True)
    with pytest.raises(ValueError, match="gives reasons for unknown"):

        @register_kernel
        class Typo(NoCausal):
            name = "test-typo"
            reasons = {"casual": "misspelt"}  # type: ignore[dict-item]  # noqa: RUF012


def test_multihead_attention_with_a_kernel_equals_the_built_in_path() -> None:
    torch.manual_seed(0)
    plain = MultiHeadAttention(16, 4).double()
    assert isinstance(plain.kernel, DenseKernel)  # "dense" is always a DenseKernel
    kernel = MultiHeadAttention(16, 4, kernel=DenseKernel()).double()
    kernel.load_state_dict(plain.state_dict())
    x = torch.randn(2, 7, 16, dtype=torch.float64)
    padding = torch.zeros(2, 7, dtype=torch.bool)
    padding[0, 5:] = True
    for causal in (False, True):
        expected, _ = plain(x, key_padding_mask=padding, causal=causal)
        got, weights = kernel(x, key_padding_mask=padding, causal=causal)
        assert weights is None
        torch.testing.assert_close(got, expected)
        _, expected_weights = plain(x, key_padding_mask=padding, causal=causal, need_weights=True)
        _, weights = kernel(x, key_padding_mask=padding, causal=causal, need_weights=True)
        torch.testing.assert_close(weights, expected_weights)


def test_multihead_attention_refuses_what_a_kernel_cannot_do() -> None:
    """The kernel's capabilities decide, each refusal in one line; the dense kernel takes
    everything."""
    x = torch.randn(1, 5, 16)
    linformer = MultiHeadAttention(16, 4, kernel=build_kernel("linformer", max_len=8))
    with pytest.raises(ValueError, match=r"^attention kernel 'linformer' cannot return attention "):
        linformer(x, need_weights=True)
    linear = MultiHeadAttention(16, 4, kernel=build_kernel("linear"))
    with pytest.raises(ValueError, match=r"^attention kernel 'linear' cannot take a mask"):
        linear(x, mask=torch.ones(5, 5, dtype=torch.bool))
    with pytest.raises(ValueError, match=r"^attention kernel 'linear' cannot take a window"):
        linear(x, window=2)
    with pytest.raises(ValueError, match=r"^attention kernel 'linformer' cannot decode from a KV"):
        linformer(x, cache=KVCache())
    with pytest.raises(ValueError, match="'linear' cannot use another score, normaliser"):
        MultiHeadAttention(16, 4, normalizer="relu", kernel=build_kernel("linear"))
    with pytest.raises(ValueError, match="'linear' cannot use another score, normaliser"):
        MultiHeadAttention(16, 4, include_self=False, kernel=build_kernel("linear"))
    with pytest.raises(ValueError, match="'window' cannot share key/value heads"):
        MultiHeadAttention(16, 4, num_kv_heads=2, kernel=build_kernel("window", window=2))
    with pytest.raises(TypeError, match="kernel must be an AttentionKernel"):
        MultiHeadAttention(16, 4, kernel=torch.nn.Identity())
    dense = MultiHeadAttention(16, 4, normalizer="relu", num_kv_heads=2, kernel=DenseKernel())
    out, weights = dense(x, mask=torch.ones(5, 5, dtype=torch.bool), window=2, need_weights=True)
    assert out.shape == (1, 5, 16) and weights is not None and weights.shape == (1, 5, 5)


def test_encoder_builds_one_kernel_per_block() -> None:
    torch.manual_seed(0)
    plain = Encoder(StackConfig(16, 4, 32, num_layers=2)).eval()
    options = {"dropout": 0.0}
    kernels = Encoder(StackConfig(16, 4, 32, num_layers=2, attention_options=options)).eval()
    kernels.load_state_dict(plain.state_dict())
    blocks = [layer.self_attn.kernel for layer in kernels.layers]
    assert all(isinstance(b, DenseKernel) for b in blocks) and blocks[0] is not blocks[1]
    x = torch.randn(2, 6, 16)
    torch.testing.assert_close(kernels(x).last_hidden_state, plain(x).last_hidden_state)
    with pytest.raises(ValueError, match="unknown attention kernel"):
        Encoder(StackConfig(16, 4, 32, num_layers=2, attention="quadratic-please"))


def test_model_config_names_the_variant() -> None:
    assert model_options().attention == "dense" and model_options().attention_options() == {}
    with pytest.raises(ValueError, match=r"model\.attention: unknown variant 'fast'"):
        model_options(attention="fast")
    with pytest.raises(ValueError, match="attention 'dense' has no size"):
        model_options(attention_size=64)


def test_memory_meter_sees_a_quadratic_matrix_and_not_a_fused_one() -> None:
    """The meter the variants' memory tests rely on: the eager formula's (L, L) scores are
    one allocation of L·L·4 bytes; the fused kernel never allocates one."""
    length = 2048
    q = torch.randn(1, 1, length, 32)
    eager = measure_memory(lambda: torch.softmax(q @ q.transpose(-1, -2) / 32**0.5, -1) @ q)
    assert eager.largest >= length * length * 4
    assert eager.peak >= 2 * length * length * 4  # scores and their softmax, both alive
    # One thread: the fused CPU kernel's scratch buffers are per thread (at 2 threads the
    # largest is 1.07 MiB here), and a test must not depend on the suite's thread count.
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        fused = measure_memory(lambda: torch.nn.functional.scaled_dot_product_attention(q, q, q))
    finally:
        torch.set_num_threads(threads)
    assert fused.largest < length * length * 4 / 16
    torch.testing.assert_close(fused.result, eager.result, rtol=1e-4, atol=1e-5)


# --------------------------------------------------------------------------- padding contract

PAD_FILLS = [float("nan"), float("inf"), float("-inf")]


def _fill_padding(t: torch.Tensor, pad: torch.Tensor, value: float) -> torch.Tensor:
    """``t (B, H, L, D)`` with ``value`` at the positions ``pad (B, L)`` marks."""
    return t.detach().masked_fill(pad[:, None, :, None], value)


@pytest.mark.parametrize("fill", PAD_FILLS, ids=["nan", "inf", "-inf"])
@pytest.mark.parametrize("name", sorted(KERNELS))
def test_every_kernel_ignores_whatever_the_padding_holds(name: str, fill: float) -> None:
    """NaN or ±inf in padded keys and values (and, in self-attention, padded queries) leave
    the real rows finite and equal to the result with zeros there; with finite queries the
    gradients are finite too. (A masked weight is 0, but 0 · NaN = NaN in weights @ V.)"""
    length = 12
    q, k, v = _qkv(length)
    pad = torch.zeros(2, length, dtype=torch.bool)
    pad[0, 9:] = True
    pad[1, ::3] = True
    real = ~pad[:, None, :, None].expand(2, 3, length, 8)
    kernel = small_kernel(name, 8, length)
    for causal in (False, True) if kernel.supports_causal else (False,):
        zeros = (_fill_padding(t, pad, 0.0) for t in (q, k, v))
        expected, _ = kernel(*zeros, key_padding_mask=pad, causal=causal)
        assert torch.isfinite(expected[real]).all()
        filled = [_fill_padding(t, pad, fill).requires_grad_() for t in (q, k, v)]
        got, _ = kernel(*filled, key_padding_mask=pad, causal=causal)
        torch.testing.assert_close(got[real], expected[real], rtol=1e-10, atol=1e-12)
        # Finite queries everywhere: the keys' and values' gradients stay finite too.
        filled[0] = q.detach().requires_grad_()
        out, _ = kernel(*filled, key_padding_mask=pad, causal=causal)
        torch.testing.assert_close(out[real], expected[real], rtol=1e-10, atol=1e-12)
        out[real].sum().backward()
        grads = [t.grad for t in filled if t.grad is not None]  # shared-QK LSH ignores k
        assert len(grads) >= 2 and all(bool(torch.isfinite(g).all()) for g in grads)
        if kernel.supports_weights:  # an attention map of padded input: the same real rows
            zeros = (_fill_padding(t, pad, 0.0) for t in (q, k, v))
            _, clean = kernel(*zeros, key_padding_mask=pad, causal=causal, need_weights=True)
            _, weights = kernel(*filled, key_padding_mask=pad, causal=causal, need_weights=True)
            assert clean is not None and weights is not None
            rows = real[..., :1].expand(2, 3, length, length)
            torch.testing.assert_close(weights[rows], clean[rows], rtol=1e-10, atol=1e-12)
