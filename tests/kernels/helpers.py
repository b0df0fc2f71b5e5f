"""What the kernel tests share: the size of each sized kernel (one table), random float64
queries, keys and values, padding filled with what a kernel must not read, and the check
that causal outputs do not see the future."""

from __future__ import annotations

import torch

from selfattn.kernels import KERNELS, AttentionKernel, build_kernel

#: The size option of each sized kernel, small enough for a 12-token test.
SIZES = {"window": 3, "performer": 64, "linformer": 16, "lsh": 2, "nystrom": 4}


def size_options(name: str) -> dict[str, int]:
    """The option that sets kernel ``name``'s size to its :data:`SIZES` entry; none for a
    kernel without a size."""
    option = KERNELS[name].size_option
    return {option: SIZES[name]} if option else {}


def small_kernel(name: str, head_dim: int, max_len: int) -> AttentionKernel:
    """Kernel ``name`` of :data:`SIZES`, in float64 and eval mode."""
    kernel = build_kernel(name, head_dim=head_dim, max_len=max_len, **size_options(name))
    return kernel.double().eval()


def random_qkv(
    batch: int, heads: int, length: int, dim: int, scale: float = 1.0
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Standard normal float64 ``q, k, v`` of shape ``(batch, heads, length, dim)``, the
    queries and keys times ``scale``."""
    q, k, v = torch.randn(3, batch, heads, length, dim, dtype=torch.float64)
    return q * scale, k * scale, v


def poison_padding(
    k: torch.Tensor, v: torch.Tensor, pad: torch.Tensor, key_value: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """Copies of ``k`` and ``v`` ``(B, H, L, ·)`` holding ``key_value`` in every padded key
    and NaN in every padded value (``pad (B, L)``): what a kernel must never read."""
    padded = pad[:, None].expand(*k.shape[:3])
    k2, v2 = k.clone(), v.clone()
    k2[padded] = key_value
    v2[padded] = float("nan")
    return k2, v2


def assert_blind_to_the_future(
    kernel: AttentionKernel,
    qkv: tuple[torch.Tensor, torch.Tensor, torch.Tensor],
    t: int,
    key_noise: float = 5.0,
) -> None:
    """``kernel``'s causal outputs before position ``t`` stay the same when the keys (noise
    times ``key_noise``) and values (times 5) from ``t`` on change."""
    q, k, v = qkv
    k2, v2 = k.clone(), v.clone()
    k2[:, :, t:] += key_noise * torch.randn_like(k2[:, :, t:])
    v2[:, :, t:] += 5 * torch.randn_like(v2[:, :, t:])
    before = kernel(q, k, v, causal=True)[0][:, :, :t]
    after = kernel(q, k2, v2, causal=True)[0][:, :, :t]
    torch.testing.assert_close(before, after, rtol=0, atol=1e-12)
