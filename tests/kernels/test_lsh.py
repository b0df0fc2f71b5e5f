"""Reformer LSH attention (Kitaev et al. 2020) against dense shared-QK attention with the
same restrictions written out as masks, in float64."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from selfattn.kernels import build_kernel
from selfattn.kernels.lsh import SELF_SCORE, LSHKernel, hash_buckets

from .helpers import poison_padding, random_qkv

B, H, L, D = 2, 3, 37, 8
F64 = torch.float64


def _qkv(length: int = L) -> tuple[torch.Tensor, ...]:
    return random_qkv(B, H, length, D)


def _dense_shared_qk(
    q: torch.Tensor,
    v: torch.Tensor,
    allowed: torch.Tensor | None = None,
    *,
    causal: bool = False,
    pad: torch.Tensor | None = None,
) -> torch.Tensor:
    """softmax(q k̂ᵀ/√D) v with k̂ = q/|q|, own position scored SELF_SCORE, masks applied."""
    length = q.shape[2]
    scores = q @ F.normalize(q, dim=-1).transpose(-1, -2) / math.sqrt(q.shape[-1])
    ok = torch.ones(B, H, length, length, dtype=torch.bool)
    if allowed is not None:
        ok = ok & allowed
    if causal:
        ok = ok & torch.ones(length, length, dtype=torch.bool).tril()
    if pad is not None:
        ok = ok & ~pad[:, None, None, :]
    scores = scores.masked_fill(~ok, -math.inf)
    scores = scores.masked_fill(ok & torch.eye(length, dtype=torch.bool), SELF_SCORE)
    return torch.softmax(scores, dim=-1) @ v


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("num_hashes", [1, 3])
def test_one_bucket_equals_full_attention(causal: bool, num_hashes: int) -> None:
    q, k, v = _qkv()
    kernel = LSHKernel(num_buckets=1, num_hashes=num_hashes, chunk_size=64)
    out = kernel(q, k, v, causal=causal)[0]
    torch.testing.assert_close(out, _dense_shared_qk(q, v, causal=causal), rtol=0, atol=1e-10)


@pytest.mark.parametrize("causal", [False, True])
def test_reference_is_dense_shared_qk_attention(causal: bool) -> None:
    q, k, v = _qkv()
    pad = torch.zeros(B, L, dtype=torch.bool)
    pad[1, :2] = True  # with causal, query 2 has only itself
    pad[0, 30:] = True
    kernel = LSHKernel(num_buckets=1, chunk_size=64)
    reference = kernel.reference(q, k, v, key_padding_mask=pad, causal=causal)
    real = ~pad[:, None, :, None].expand_as(reference)
    expected = _dense_shared_qk(q, v, causal=causal, pad=pad)
    torch.testing.assert_close(reference[real], expected[real], rtol=0, atol=1e-12)
    out = kernel(q, k, v, key_padding_mask=pad, causal=causal)[0]
    torch.testing.assert_close(out[real], reference[real], rtol=0, atol=1e-10)
    unshared = LSHKernel(num_buckets=1, chunk_size=64, shared_qk=False)
    torch.testing.assert_close(
        unshared(q, k, v, causal=causal)[0], unshared.reference(q, k, v, causal=causal)
    )


def test_one_bucket_with_padding_equals_full_attention_on_real_tokens() -> None:
    q, k, v = _qkv()
    pad = torch.zeros(B, L, dtype=torch.bool)
    pad[0, 30:] = True
    pad[1, ::3] = True
    q2, v2 = poison_padding(q, v, pad, 7.0)  # padded queries (the keys) changed too
    kernel = LSHKernel(num_buckets=1, num_hashes=2, chunk_size=64)
    out = kernel(q2, k, v2, key_padding_mask=pad)[0]
    real = ~pad[:, None, :, None].expand_as(out)
    expected = _dense_shared_qk(q, v, pad=pad)
    torch.testing.assert_close(out[real], expected[real], rtol=0, atol=1e-10)
    assert torch.all(out[~real] == 0)


def test_chunks_attend_to_themselves_and_the_previous_chunk() -> None:
    q, k, v = _qkv()
    chunk = 8  # one bucket: sorted order is position order
    block = torch.arange(L) // chunk
    allowed = (block[:, None] - block[None, :] >= 0) & (block[:, None] - block[None, :] <= 1)
    out = LSHKernel(num_buckets=1, num_hashes=1, chunk_size=chunk)(q, k, v)[0]
    torch.testing.assert_close(out, _dense_shared_qk(q, v, allowed), rtol=0, atol=1e-10)


@pytest.mark.parametrize("shared_qk", [True, False])
def test_single_chunk_attends_within_buckets(shared_qk: bool) -> None:
    q, k, v = _qkv()
    kernel = LSHKernel(num_buckets=4, num_hashes=1, chunk_size=64, shared_qk=shared_qk, seed=5)
    rotation = torch.randn(1, D, 2, generator=torch.Generator().manual_seed(5))[0]
    q_bucket = hash_buckets(q, rotation, 4)
    if shared_qk:
        allowed = q_bucket[..., :, None] == q_bucket[..., None, :]
        expected = _dense_shared_qk(q, v, allowed)
    else:
        k_bucket = hash_buckets(k, rotation, 4)
        allowed = q_bucket[..., :, None] == k_bucket[..., None, :]
        scores = (q @ k.transpose(-1, -2) / math.sqrt(D)).masked_fill(~allowed, -math.inf)
        weights = torch.softmax(scores, dim=-1).nan_to_num()  # a query alone in its bucket: 0
        expected = weights @ v
    torch.testing.assert_close(kernel(q, k, v)[0], expected, rtol=0, atol=1e-10)


def test_hash_buckets_is_argmax_over_both_signs() -> None:
    x = torch.randn(2, 3, 50, D)
    rotation = torch.randn(D, 6)
    rotated = x @ rotation
    expected = torch.cat([rotated, -rotated], dim=-1).argmax(dim=-1)
    assert torch.equal(hash_buckets(x, rotation, 12), expected)
    # Angular: scale does not change the bucket.
    assert torch.equal(hash_buckets(3 * x, rotation, 12), expected)


def test_approximate_attention_respects_causality_and_padding() -> None:
    q, k, v = _qkv(64)
    kernel = LSHKernel(num_buckets=4, num_hashes=2, chunk_size=8)
    pad = torch.zeros(B, 64, dtype=torch.bool)
    pad[0, 50:] = True
    out = kernel(q, k, v, causal=True, key_padding_mask=pad)[0]
    t = 30
    q2, v2 = q.clone(), v.clone()
    q2[:, :, t:] = torch.randn_like(q2[:, :, t:])
    v2[:, :, t:] = torch.randn_like(v2[:, :, t:])
    # Later tokens can move earlier ones between chunks, so compare with everything after t
    # padded away: then the earlier tokens' chunks are the same in both runs.
    late = pad.clone()
    late[:, t:] = True
    a = kernel(q, k, v, causal=True, key_padding_mask=late)[0][:, :, :t]
    b = kernel(q2, k, v2, causal=True, key_padding_mask=late)[0][:, :, :t]
    torch.testing.assert_close(a, b, rtol=0, atol=1e-12)
    assert torch.isfinite(out).all()


@pytest.mark.parametrize("shared_qk", [True, False])
@pytest.mark.parametrize("causal", [False, True])
def test_weights_over_chunks_and_rounds_times_values_is_the_output(
    causal: bool, shared_qk: bool
) -> None:
    """Each round's chunk weights, scattered to their positions and combined as the rounds
    are, are the softmax weights each query gave the keys it met: ``weights @ V = out``."""
    q, k, v = _qkv(40)
    pad = torch.zeros(B, 40, dtype=torch.bool)
    pad[1, 25:] = True
    kernel = LSHKernel(num_buckets=4, num_hashes=3, chunk_size=4, shared_qk=shared_qk)
    out, weights = kernel(q, k, v, causal=causal, key_padding_mask=pad, need_weights=True)
    assert weights is not None and weights.shape == (B, H, 40, 40)
    torch.testing.assert_close(weights @ v, out, rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(out, kernel(q, k, v, causal=causal, key_padding_mask=pad)[0])
    assert torch.all(weights >= 0) and torch.all(weights.masked_select(pad[:, None, None]) == 0)
    found = weights.sum(-1)[~pad[:, None, :].expand(B, H, 40)]  # real queries find a key
    torch.testing.assert_close(found[found > 0], torch.ones_like(found[found > 0]))
    if causal:
        assert torch.all(weights.triu(diagonal=1) == 0)
    sparse = (weights > 0).sum(-1).max()
    assert sparse <= 3 * 2 * 4  # rounds × (own chunk + previous chunk)


def test_gradients_are_finite_with_padding_and_empty_rounds() -> None:
    q, k, v = (t.requires_grad_() for t in _qkv(40))
    pad = torch.zeros(B, 40, dtype=torch.bool)
    pad[1, 10:] = True
    out = LSHKernel(num_buckets=8, num_hashes=3, chunk_size=4)(q, k, v, key_padding_mask=pad)[0]
    out.sum().backward()
    assert all(t.grad is not None and torch.isfinite(t.grad).all() for t in (q, v))


def test_default_buckets_follow_the_paper() -> None:
    kernel = LSHKernel(chunk_size=64)
    assert kernel.buckets_for(64) == 1 and kernel.buckets_for(1000) == 2 * 16


def test_options_are_checked() -> None:
    with pytest.raises(ValueError, match="1 or even"):
        LSHKernel(num_buckets=3)
    with pytest.raises(ValueError, match="'lsh' cannot attend from T queries to S != T keys"):
        LSHKernel()(torch.randn(1, 1, 4, D), torch.randn(1, 1, 5, D), torch.randn(1, 1, 5, D))
    kernel = build_kernel("lsh", num_hashes=2, head_dim=D, max_len=100)
    assert isinstance(kernel, LSHKernel) and kernel.num_hashes == 2
    assert LSHKernel.size_option == "num_buckets"  # model.attention_size
    with pytest.raises(ValueError, match="takes no option 'n_buckets'"):
        build_kernel("lsh", n_buckets=4)


def test_redraw_changes_the_rotations() -> None:
    q, k, v = _qkv(64)
    kernel = LSHKernel(num_buckets=8, num_hashes=1, chunk_size=8)
    first = kernel(q, k, v)[0]
    torch.testing.assert_close(kernel(q, k, v)[0], first)  # deterministic
    kernel.redraw()
    assert not torch.allclose(kernel(q, k, v)[0], first)
