"""MultiHeadAttention against torch.nn.MultiheadAttention, and its own options."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from selfattn import MultiHeadAttention
from selfattn.attention import NORMALIZERS, SCORES, functional
from selfattn.kernels import DenseKernel, build_kernel

E, H, B, T = 16, 4, 3, 7


def _padding() -> torch.Tensor:
    pad = torch.zeros(B, T, dtype=torch.bool)
    pad[1, -3:] = True
    pad[2, -1:] = True
    return pad


@pytest.mark.parametrize("batch_first", [True, False])
@pytest.mark.parametrize("mask_kind", ["none", "bool", "float", "causal_float"])
def test_from_torch_matches_outputs_and_weights(mask_kind: str, batch_first: bool) -> None:
    ref = nn.MultiheadAttention(E, H, batch_first=batch_first).eval()
    ours = MultiHeadAttention.from_torch(ref).eval()
    x = torch.randn(B, T, E)
    pad = _padding()
    attn_mask = {
        "none": None,
        "bool": torch.rand(T, T) > 0.2,  # torch: True = NOT allowed
        "float": torch.randn(T, T),
        "causal_float": nn.Transformer.generate_square_subsequent_mask(T),
    }[mask_kind]
    if attn_mask is not None and attn_mask.dtype == torch.bool:
        attn_mask[:, 0] = False  # keep every row attending to something
    ref_in = x if batch_first else x.transpose(0, 1)
    for average in (True, False):
        expected, expected_w = ref(
            ref_in,
            ref_in,
            ref_in,
            key_padding_mask=pad,
            attn_mask=attn_mask,
            average_attn_weights=average,
        )
        if not batch_first:
            expected = expected.transpose(0, 1)
        our_mask = (
            None
            if attn_mask is None
            else (~attn_mask if attn_mask.dtype == torch.bool else attn_mask)
        )
        out, weights = ours(
            x, key_padding_mask=pad, mask=our_mask, need_weights=True, average_weights=average
        )
        torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(weights, expected_w, rtol=1e-5, atol=1e-5)
        fast, _ = ours(x, key_padding_mask=pad, mask=our_mask)
        torch.testing.assert_close(fast, expected, rtol=1e-5, atol=1e-5)


def test_from_torch_cross_attention_with_other_key_and_value_sizes() -> None:
    ref = nn.MultiheadAttention(E, H, kdim=10, vdim=6, batch_first=True).eval()
    ours = MultiHeadAttention.from_torch(ref).eval()
    x, key, value = torch.randn(B, T, E), torch.randn(B, 5, 10), torch.randn(B, 5, 6)
    expected, expected_w = ref(x, key, value)
    out, weights = ours(x, key, value, need_weights=True)
    torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(weights, expected_w, rtol=1e-5, atol=1e-5)


def test_from_torch_without_bias_and_refusals() -> None:
    ref = nn.MultiheadAttention(E, H, bias=False, batch_first=True).eval()
    ours = MultiHeadAttention.from_torch(ref).eval()
    x = torch.randn(B, T, E)
    torch.testing.assert_close(ours(x)[0], ref(x, x, x)[0], rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="add_bias_kv"):
        MultiHeadAttention.from_torch(nn.MultiheadAttention(E, H, add_bias_kv=True))


def test_lecture_formula_for_two_heads() -> None:
    """b^i = W^O [b^{i,1}; b^{i,2}], each head attending with its own q, k, v."""
    mha = MultiHeadAttention(4, 2, bias=False).double()
    a = torch.randn(1, 3, 4, dtype=torch.float64)
    q, k, v = mha.q_proj(a)[0], mha.k_proj(a)[0], mha.v_proj(a)[0]  # (L, H·D)
    heads = []
    for h in range(2):
        cols = slice(2 * h, 2 * h + 2)
        alpha = q[:, cols] @ k[:, cols].T / 2**0.5
        heads.append(torch.softmax(alpha, dim=-1) @ v[:, cols])
    expected = torch.cat(heads, dim=-1) @ mha.out_proj.weight.T
    torch.testing.assert_close(mha(a)[0][0], expected)


@pytest.mark.parametrize("normalizer", list(NORMALIZERS))
@pytest.mark.parametrize("score", list(SCORES))
def test_every_score_and_normalizer_trains(score: str, normalizer: str) -> None:
    mha = MultiHeadAttention(E, H, score=score, normalizer=normalizer)
    x = torch.randn(B, T, E)
    out, weights = mha(x, key_padding_mask=_padding(), need_weights=True, average_weights=False)
    assert out.shape == (B, T, E) and weights is not None and weights.shape == (B, H, T, T)
    out.square().mean().backward()
    for name, param in mha.named_parameters():
        assert param.grad is not None and param.grad.abs().sum() > 0, name


def test_grouped_query_equals_full_heads_with_repeated_projections() -> None:
    grouped = MultiHeadAttention(E, H, num_kv_heads=2)
    full = MultiHeadAttention(E, H)
    head_dim = E // H
    with torch.no_grad():
        full.q_proj.load_state_dict(grouped.q_proj.state_dict())
        full.out_proj.load_state_dict(grouped.out_proj.state_dict())
        for src, dst in ((grouped.k_proj, full.k_proj), (grouped.v_proj, full.v_proj)):
            w = src.weight.unflatten(0, (2, head_dim)).repeat_interleave(2, 0).flatten(0, 1)
            b = src.bias.unflatten(0, (2, head_dim)).repeat_interleave(2, 0).flatten(0, 1)
            dst.weight.copy_(w)
            dst.bias.copy_(b)
    x = torch.randn(B, T, E)
    torch.testing.assert_close(grouped(x, causal=True)[0], full(x, causal=True)[0])
    assert grouped.k_proj.weight.shape == (2 * head_dim, E)


def test_multi_query_and_explicit_head_dim() -> None:
    mha = MultiHeadAttention(E, H, num_kv_heads=1, head_dim=8)
    assert mha(torch.randn(B, T, E))[0].shape == (B, T, E)


def test_self_exclusion_never_weights_the_diagonal() -> None:
    mha = MultiHeadAttention(E, H, include_self=False)
    _, weights = mha(torch.randn(B, T, E), need_weights=True, average_weights=False)
    assert weights is not None
    assert torch.all(weights.diagonal(dim1=-2, dim2=-1) == 0)


def test_configuration_errors() -> None:
    with pytest.raises(ValueError, match="divisible"):
        MultiHeadAttention(10, 3)
    with pytest.raises(ValueError, match="num_kv_heads"):
        MultiHeadAttention(E, H, num_kv_heads=3)
    mha = MultiHeadAttention(E, H)
    with pytest.raises(ValueError, match=r"\(B, T, E\)"):
        mha(torch.randn(T, E))
    with pytest.raises(ValueError, match="embed_dim"):
        mha(torch.randn(B, T, E + 1))


def test_from_torch_copies_float64_weights_exactly() -> None:
    ref = nn.MultiheadAttention(E, H, batch_first=True).double()
    ours = MultiHeadAttention.from_torch(ref)
    assert ours.q_proj.weight.dtype == torch.float64
    assert torch.equal(ours.q_proj.weight, ref.in_proj_weight[:E])


def test_projections_start_as_torch_multihead_attention_does() -> None:
    """Xavier-uniform in-projections (bound sqrt(6 / 4E), torch's fused (3E, E) matrix)
    and zero biases: with nn.Linear's default (bound 1/sqrt(E), random biases) a small
    encoder-decoder learned a reversal task 3x slower than torch's stacks."""
    torch.manual_seed(0)
    embed_dim = 256
    ours = MultiHeadAttention(embed_dim, 4)
    reference = nn.MultiheadAttention(embed_dim, 4)
    bound = math.sqrt(6.0 / (4 * embed_dim))
    for proj in (ours.q_proj, ours.k_proj, ours.v_proj):
        assert float(proj.weight.abs().max()) <= bound
        assert float(proj.weight.abs().max()) > 0.99 * bound
        assert torch.allclose(proj.weight.std(), reference.in_proj_weight.std(), rtol=0.02)
    for proj in (ours.q_proj, ours.k_proj, ours.v_proj, ours.out_proj):
        assert not proj.bias.any()


@pytest.mark.parametrize("need_weights", [False, True])
@pytest.mark.parametrize("normalizer", ["softmax", "relu", "sigmoid"])
def test_padded_inputs_holding_nan_or_inf_change_no_real_row(
    normalizer: str, need_weights: bool
) -> None:
    module = MultiHeadAttention(E, H, normalizer=normalizer).double().eval()
    x = torch.randn(B, T, E, dtype=torch.float64)
    memory = torch.randn(B, T + 2, E, dtype=torch.float64)
    pad, memory_pad = _padding(), torch.zeros(B, T + 2, dtype=torch.bool)
    memory_pad[0, 3:] = True
    real = ~pad

    def fill(t: torch.Tensor, mask: torch.Tensor, value: float) -> torch.Tensor:
        return t.masked_fill(mask[..., None], value)

    expected, expected_w = module(fill(x, pad, 0.0), key_padding_mask=pad, need_weights=True)
    cross, _ = module(x, fill(memory, memory_pad, 0.0), key_padding_mask=memory_pad)
    for value in (float("nan"), float("inf"), float("-inf")):
        out, weights = module(fill(x, pad, value), key_padding_mask=pad, need_weights=need_weights)
        torch.testing.assert_close(out[real], expected[real])
        if need_weights:
            assert weights is not None
            torch.testing.assert_close(weights[real], expected_w[real])
            assert torch.all(weights[real[:, :, None] & pad[:, None, :]] == 0)
        # Cross-attention to a padded memory: every query row is real, gradients finite.
        filled = fill(memory, memory_pad, value).requires_grad_()
        got, _ = module(x, filled, key_padding_mask=memory_pad)
        torch.testing.assert_close(got, cross)
        got.sum().backward()
        assert filled.grad is not None and torch.isfinite(filled.grad).all()


def test_the_dense_kernel_still_takes_the_fused_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """Behind the kernel interface, plain softmax attention is one fused SDPA call on the
    projected heads; attention maps (weights) take the eager formula instead."""
    calls: list[tuple[int, ...]] = []
    real = functional.F.scaled_dot_product_attention

    def spy(q: torch.Tensor, *args: object, **kwargs: object) -> torch.Tensor:
        calls.append(tuple(q.shape))
        return real(q, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(functional.F, "scaled_dot_product_attention", spy)
    mha = MultiHeadAttention(E, H).eval()
    assert isinstance(mha.kernel, DenseKernel)
    mha(torch.randn(B, T, E), key_padding_mask=_padding(), causal=True)
    assert calls == [(B, H, T, E // H)]
    mha(torch.randn(B, T, E), need_weights=True)
    assert len(calls) == 1


def test_the_dense_kernel_carries_the_dropout_and_the_state_dict_is_unchanged() -> None:
    """The dense kernel holds no parameters: checkpoints keep their keys (an additive
    score's included), and the attention dropout is the kernel's."""
    mha = MultiHeadAttention(E, H, dropout=0.3, score="additive")
    assert mha.dropout == 0.3 and isinstance(mha.kernel, DenseKernel)
    assert mha.kernel.dropout == 0.3
    keys = set(mha.state_dict())
    assert {"score.q_proj.weight", "score.k_proj.bias", "score.w.weight"} <= keys
    assert not any(key.startswith("kernel.") for key in keys)
    assert MultiHeadAttention(E, H, kernel=build_kernel("linear")).dropout == 0.0
    window = build_kernel("window", window=2, dropout=0.2)
    assert MultiHeadAttention(E, H, kernel=window).dropout == 0.2


def test_window_kernel_weights_equal_dense_weights_with_the_window() -> None:
    """An attention map of a windowed model: the window kernel's weights are the dense
    kernel's under the band, averaged over heads like any others."""
    dense = MultiHeadAttention(E, H).double().eval()
    windowed = MultiHeadAttention(E, H, kernel=build_kernel("window", window=2)).double().eval()
    windowed.load_state_dict(dense.state_dict())
    x = torch.randn(B, T, E, dtype=torch.float64)
    expected, expected_w = dense(x, key_padding_mask=_padding(), window=2, need_weights=True)
    out, weights = windowed(x, key_padding_mask=_padding(), need_weights=True)
    torch.testing.assert_close(out, expected)
    torch.testing.assert_close(weights, expected_w)
