"""The window kernel is the dense kernel under a band mask, without an L × L anything."""

from __future__ import annotations

import warnings

import pytest
import torch
import torch.nn.functional as F

from selfattn.attention import attention, causal_mask, window_mask
from selfattn.bench.memory import measure_memory
from selfattn.kernels import KERNELS, build_kernel
from selfattn.kernels.window import (
    WindowKernel,
    band_block_mask,
    flex_available,
    window_attention,
)

F64 = torch.float64
B, H, D = 2, 3, 8

# (L, window, block_size, causal, padded): L not a multiple of the block, w = 0, w ≥ L,
# one-query blocks, the default block.
CASES = [
    (16, 3, 4, False, False),
    (37, 5, 8, False, True),
    (37, 5, 8, True, True),
    (37, 0, None, False, False),
    (37, 0, 5, True, True),
    (20, 50, None, False, True),
    (20, 50, 7, True, False),
    (50, 10, 1, False, True),
    (70, 8, None, True, False),
    (130, 20, None, False, True),
]


def _inputs(length: int, dtype: torch.dtype = F64) -> tuple[torch.Tensor, ...]:
    return tuple(torch.randn(B, H, length, D, dtype=dtype, requires_grad=True) for _ in range(3))


def _padding(length: int, window: int) -> torch.Tensor:
    """Random padding, plus a run in sequence 1 wider than the band, so some queries
    there have no key at all."""
    pad = torch.rand(B, length) < 0.3
    pad[1, length // 4 : length // 4 + 2 * window + 3] = True
    return pad


def _case(
    length: int, window: int, padded: bool
) -> tuple[tuple[torch.Tensor, ...], torch.Tensor | None]:
    """One case of :data:`CASES`: its inputs, and its padding when ``padded``."""
    return _inputs(length), _padding(length, window) if padded else None


def _grads(out: torch.Tensor, inputs: tuple[torch.Tensor, ...], grad_out: torch.Tensor) -> tuple:
    return torch.autograd.grad(out, inputs, grad_out)


@pytest.mark.parametrize(("length", "window", "block", "causal", "padded"), CASES)
def test_equals_dense_attention_with_window(
    length: int, window: int, block: int | None, causal: bool, padded: bool
) -> None:
    (q, k, v), pad = _case(length, window, padded)
    kernel = build_kernel("window", window=window, block_size=block)
    out = kernel(q, k, v, key_padding_mask=pad, causal=causal)[0]
    expected, _ = attention(q, k, v, window=window, causal=causal, key_padding_mask=pad)
    torch.testing.assert_close(out, expected, rtol=0, atol=1e-10)
    grad_out = torch.randn_like(out)
    for ours, theirs in zip(
        _grads(out, (q, k, v), grad_out), _grads(expected, (q, k, v), grad_out), strict=True
    ):
        assert torch.isfinite(ours).all()
        torch.testing.assert_close(ours, theirs, rtol=0, atol=1e-10)


@pytest.mark.parametrize(("length", "window", "block", "causal", "padded"), CASES)
def test_equals_sdpa_under_reference_mask(
    length: int, window: int, block: int | None, causal: bool, padded: bool
) -> None:
    (q, k, v), pad = _case(length, window, padded)
    kernel = WindowKernel(window, block_size=block)
    allowed = kernel.reference_mask(length, length, q.device, causal=causal)
    if pad is not None:
        allowed = allowed & ~pad[:, None, None, :]
    has_key = allowed.any(dim=-1, keepdim=True)
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed | ~has_key)
    expected = expected.masked_fill(~has_key, 0.0)
    out = kernel(q, k, v, key_padding_mask=pad, causal=causal)[0]
    torch.testing.assert_close(out, expected, rtol=0, atol=1e-10)


@pytest.mark.parametrize("causal", [False, True])
def test_equals_its_reference(causal: bool) -> None:
    q, k, v = (t.detach() for t in _inputs(45))
    pad = _padding(45, 4)
    kernel = WindowKernel(4, block_size=16)
    torch.testing.assert_close(
        kernel(q, k, v, key_padding_mask=pad, causal=causal)[0],
        kernel.reference(q, k, v, key_padding_mask=pad, causal=causal),
        rtol=0,
        atol=1e-10,
    )


def test_reference_mask_is_the_band() -> None:
    kernel = WindowKernel(2)
    assert torch.equal(kernel.reference_mask(9, 9, torch.device("cpu")), window_mask(9, 9, 2))
    causal = kernel.reference_mask(9, 9, torch.device("cpu"), causal=True)
    assert torch.equal(causal, window_mask(9, 9, 2) & causal_mask(9, 9))


def test_query_with_no_key_outputs_zero_with_finite_gradients() -> None:
    q, k, v = _inputs(30)
    pad = torch.zeros(B, 30, dtype=torch.bool)
    pad[0, 5:20] = True  # queries 9..15 of sequence 0 see only padding (w = 4)
    out = window_attention(q, k, v, 4, key_padding_mask=pad, block_size=8)
    assert torch.equal(out[0, :, 9:16], torch.zeros_like(out[0, :, 9:16]))
    assert out[0, :, 8].abs().sum() > 0 and out[0, :, 16].abs().sum() > 0
    out.sum().backward()
    assert all(torch.isfinite(t.grad).all() for t in (q, k, v) if t.grad is not None)


@pytest.mark.parametrize("causal", [False, True])
def test_no_dependence_outside_the_window(causal: bool) -> None:
    """Truncated attention: changing the keys and values farther than w from query i
    leaves output i exactly as it was, and changes the outputs that can see them."""
    length, window, row = 40, 3, 20
    q, k, v = (t.detach() for t in _inputs(length))
    out = window_attention(q, k, v, window, causal=causal, block_size=8)
    far = (torch.arange(length) - row).abs() > window
    k2, v2 = k.clone(), v.clone()
    k2[:, :, far] += torch.randn_like(k2[:, :, far])
    v2[:, :, far] += torch.randn_like(v2[:, :, far])
    changed = window_attention(q, k2, v2, window, causal=causal, block_size=8)
    torch.testing.assert_close(changed[:, :, row], out[:, :, row], rtol=0, atol=1e-13)
    assert not torch.allclose(changed[:, :, row + window + 1], out[:, :, row + window + 1])


def test_empty_sequence() -> None:
    q = torch.randn(2, 3, 0, 4)
    assert window_attention(q, q, q, 3).shape == (2, 3, 0, 4)


def test_dropout_only_in_training() -> None:
    q, k, v = (t.detach() for t in _inputs(33))
    kernel = WindowKernel(4, dropout=0.5)
    plain = window_attention(q, k, v, 4)
    dropped = kernel(q, k, v)[0]
    assert torch.isfinite(dropped).all() and not torch.allclose(dropped, plain)
    torch.testing.assert_close(kernel.eval()(q, k, v)[0], plain, rtol=0, atol=0)


def test_registered_with_its_properties() -> None:
    assert KERNELS["window"] is WindowKernel
    assert WindowKernel.exact and WindowKernel.supports_causal and not WindowKernel.quadratic
    assert WindowKernel.size_option == "window"  # model.attention_size sets the window
    kernel = build_kernel("window", window=5, head_dim=D, max_len=128)
    assert isinstance(kernel, WindowKernel) and kernel.window == 5


def test_errors() -> None:
    q = torch.randn(1, 2, 10, 4)
    with pytest.raises(ValueError, match="window must be a non-negative int"):
        WindowKernel(-1)
    with pytest.raises(ValueError, match="block_size must be >= 1"):
        WindowKernel(3, block_size=0)
    longer = torch.randn(1, 2, 12, 4)
    with pytest.raises(ValueError, match="'window' cannot attend from T queries to S != T keys"):
        WindowKernel(3)(q, longer, longer)
    with pytest.raises(ValueError, match="self-attention: q and k lengths differ"):
        window_attention(q, longer, longer, 3)
    with pytest.raises(ValueError, match="'window' cannot share key/value heads"):
        WindowKernel(3)(q, torch.randn(1, 1, 10, 4), torch.randn(1, 1, 10, 4))
    with pytest.raises(ValueError, match="q's heads be a multiple of k's"):
        WindowKernel(3)(q, torch.randn(1, 3, 10, 4), torch.randn(1, 3, 10, 4))
    with pytest.raises(ValueError, match="as many key/value heads as query heads"):
        window_attention(q, q[:, :1], q[:, :1], 3)
    with pytest.raises(ValueError, match="window must be a non-negative int"):
        window_attention(q, q, q, -2)
    with pytest.raises(ValueError, match="implementation must be"):
        window_attention(q, q, q, 2, implementation="sparse")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="no attention dropout"):
        window_attention(q, q, q, 2, dropout=0.1, implementation="flex")


# --------------------------------------------------------------------------- FlexAttention


@pytest.mark.skipif(not flex_available(), reason="needs torch.nn.attention.flex_attention")
@pytest.mark.parametrize(("length", "window", "causal"), [(200, 3, False), (300, 130, True)])
def test_flex_block_mask_lists_exactly_the_tiles_the_band_reaches(
    length: int, window: int, causal: bool
) -> None:
    tiles = band_block_mask(length, window, causal, None, torch.device("cpu")).to_dense()[0, 0]
    allowed = window_mask(length, length, window)
    if causal:
        allowed &= causal_mask(length, length)
    i, j = allowed.nonzero(as_tuple=True)
    needed = torch.zeros_like(tiles, dtype=torch.bool)
    needed[i // 128, j // 128] = True
    assert torch.equal(tiles.bool(), needed)


@pytest.mark.skipif(not flex_available(), reason="needs torch.nn.attention.flex_attention")
@pytest.mark.parametrize("causal", [False, True])
def test_flex_equals_blocked_on_cpu(causal: bool) -> None:
    """On CPU FlexAttention runs unfused and forward only (no inputs requiring grad), but
    it runs: the flex path's block mask and mask_mod give the blocked path's result, and
    NaN in its padded keys and values changes nothing."""
    length, window = 300, 20
    q, k, v = (t.detach() for t in _inputs(length))
    pad = _padding(length, window)
    blocked = window_attention(
        q, k, v, window, causal=causal, key_padding_mask=pad, implementation="blocked"
    )
    k, v = (t.masked_fill(pad[:, None, :, None], float("nan")) for t in (k, v))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "flex_attention called without torch.compile()"
        flex = window_attention(
            q, k, v, window, causal=causal, key_padding_mask=pad, implementation="flex"
        )
    torch.testing.assert_close(flex, blocked, rtol=0, atol=1e-10)


@pytest.mark.gpu
@pytest.mark.skipif(not flex_available(), reason="needs torch.nn.attention.flex_attention")
@pytest.mark.parametrize("causal", [False, True])
def test_compiled_flex_equals_blocked_on_cuda(causal: bool) -> None:
    length, window = 1000, 50
    q, k, v = (torch.randn(B, H, length, 64, device="cuda", requires_grad=True) for _ in range(3))
    pad = _padding(length, window).cuda()
    grad_out = torch.randn(B, H, length, 64, device="cuda")
    results = []
    for implementation in ("flex", "blocked"):
        out = window_attention(
            q, k, v, window, causal=causal, key_padding_mask=pad, implementation=implementation
        )
        results.append((out, *_grads(out, (q, k, v), grad_out)))
    for flex, blocked in zip(*results, strict=True):
        assert torch.isfinite(flex).all()
        torch.testing.assert_close(flex, blocked, rtol=1e-4, atol=1e-4)


# --------------------------------------------------------------------------- memory


def test_memory_grows_linearly_with_length() -> None:
    peaks = []
    for length in (1024, 4096):
        q, k, v = (torch.randn(1, 2, length, 32, requires_grad=True) for _ in range(3))
        peaks.append(
            measure_memory(lambda q=q, k=k, v=v: window_attention(q, k, v, 32).sum().backward())
        )
    assert peaks[1].peak < 6 * peaks[0].peak  # 4× the length: ~4×, not 16×


@pytest.mark.slow
def test_no_quadratic_allocation_forward_and_backward() -> None:
    length, window, heads, head_dim = 8192, 64, 2, 32
    q, k, v = (torch.randn(1, heads, length, head_dim, requires_grad=True) for _ in range(3))
    kernel = WindowKernel(window)
    ours = measure_memory(lambda: kernel(q, k, v)[0].sum().backward())
    dense = measure_memory(lambda: attention(q, k, v, window=window)[0].sum().backward())
    square = length * length * 4
    assert ours.largest < square / 16, f"largest allocation {ours.largest} B"
    assert dense.largest >= square  # the meter does see the dense kernel's L × L mask
    assert ours.peak * 10 < dense.peak, f"peak {ours.peak} B vs dense {dense.peak} B"
