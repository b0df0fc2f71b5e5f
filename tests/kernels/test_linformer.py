"""Linformer (Wang et al. 2020): softmax attention over E·K and F·V, with its length limit."""

from __future__ import annotations

import math

import pytest
import torch

from selfattn.kernels import build_kernel
from selfattn.kernels.linformer import LinformerKernel

from .helpers import poison_padding, random_qkv

B, H, D, MAX_LEN, K = 2, 3, 8, 32, 6
F64 = torch.float64


def _qkv(length: int) -> tuple[torch.Tensor, ...]:
    return random_qkv(B, H, length, D)


def test_is_softmax_attention_over_projected_keys() -> None:
    q, k, v = _qkv(20)
    kernel = LinformerKernel(max_len=MAX_LEN, proj_dim=K).double()
    e, f = kernel.key_proj[:, :20], kernel.value_proj[:, :20]  # the first S columns
    weights = torch.softmax(q @ (e @ k).transpose(-1, -2) / math.sqrt(D), dim=-1)
    torch.testing.assert_close(kernel(q, k, v)[0], weights @ (f @ v))


def test_padded_keys_contribute_nothing() -> None:
    q, k, v = _qkv(20)
    pad = torch.zeros(B, 20, dtype=torch.bool)
    pad[0, 15:] = True
    pad[1, ::2] = True
    k2, v2 = poison_padding(k, v, pad, 1e3)
    kernel = LinformerKernel(max_len=MAX_LEN, proj_dim=K).double()
    out = kernel(q, k, v, key_padding_mask=pad)[0]
    torch.testing.assert_close(out, kernel(q, k2, v2, key_padding_mask=pad)[0])


def test_longer_than_max_len_is_refused() -> None:
    q, k, v = _qkv(MAX_LEN + 1)
    kernel = LinformerKernel(max_len=MAX_LEN, proj_dim=K).double()
    with pytest.raises(ValueError, match=rf"max_len={MAX_LEN}, got {MAX_LEN + 1} keys"):
        kernel(q, k, v)


def test_causal_is_refused() -> None:
    q, k, v = _qkv(8)
    with pytest.raises(
        ValueError, match=r"^attention kernel 'linformer' cannot attend causally: [^\n]+$"
    ):
        LinformerKernel(max_len=MAX_LEN).double()(q, k, v, causal=True)


def test_projections_learn_and_can_be_shared() -> None:
    q, k, v = (t.requires_grad_() for t in _qkv(10))
    kernel = LinformerKernel(max_len=MAX_LEN, proj_dim=K).double()
    kernel(q, k, v)[0].sum().backward()
    assert kernel.key_proj.grad is not None and kernel.key_proj.grad[:, 10:].abs().sum() == 0
    assert kernel.value_proj.grad is not None
    shared = LinformerKernel(max_len=MAX_LEN, proj_dim=K, share_kv=True)
    assert shared.key_proj is shared.value_proj and len(list(shared.parameters())) == 1


def test_build_needs_max_len_and_rejects_unknown_options() -> None:
    kernel = build_kernel("linformer", max_len=MAX_LEN, proj_dim=K, head_dim=D)
    assert isinstance(kernel, LinformerKernel) and kernel.key_proj.shape == (K, MAX_LEN)
    assert LinformerKernel.size_option == "proj_dim"  # model.attention_size
    with pytest.raises(ValueError, match="needs max_len"):
        build_kernel("linformer")
    with pytest.raises(ValueError, match="takes no option 'k'"):
        build_kernel("linformer", max_len=MAX_LEN, k=4)
