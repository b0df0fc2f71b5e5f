"""Linear attention: "Transformers are RNNs" (Katharopoulos et al., ICML 2020).

Softmax attention weighs value j by ``exp(q_i·k_j/√D)``. Replace that similarity by a
kernel ``φ(q_i)ᵀφ(k_j)`` with a positive feature map φ and the sums reassociate::

    out_i = Σ_j φ(q_i)ᵀφ(k_j) v_j / Σ_j φ(q_i)ᵀφ(k_j)
          = φ(q_i)ᵀ (Σ_j φ(k_j) v_jᵀ) / φ(q_i)ᵀ (Σ_j φ(k_j))          # s = Σ φ(k) vᵀ, z = Σ φ(k)

so ``s`` (D × Dv) and ``z`` (D) are computed once and no ``T × S`` matrix exists: time
O(L·D·Dv), memory O(L·(D + Dv) + D·Dv). With ``φ(x) = elu(x) + 1`` this is the paper's
linear attention; :mod:`selfattn.kernels.performer` plugs in random features instead.

Causal attention sums over j ≤ i only, i.e. prefix sums ``s_i``, ``z_i``: attention *is*
an RNN whose state is ``(s, z)`` (lecture 000, self-attention vs RNN). Three equal forms:

* :meth:`LinearKernel.step` / :meth:`LinearKernel.recurrent` — one token at a time,
  constant memory (the RNN);
* :func:`causal_linear_attention` — the parallel form, chunked: inside a chunk of c
  positions a masked ``c × c`` product, across chunks the running state, so memory is
  O(L·c + (L/c)·D·Dv) (at most O(L·(c + D)) for c ≥ Dv) rather than the O(L·D·Dv) of
  materialising every prefix state.

The matrix the kernel implies, ``A_ij = φ(q_i)ᵀφ(k_j) / Σ_j' φ(q_i)ᵀφ(k_j')`` with
``out = A V``, is what an attention map of it shows
(:func:`linear_attention_weights`); it is formed only when asked for.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass
from typing import ClassVar

import torch
import torch.nn.functional as F
from torch import Tensor

from selfattn.attention.functional import zero_padding
from selfattn.attention.kernel import AttentionKernel, AttentionRequest, Capability
from selfattn.attention.masks import causal_mask
from selfattn.kernels.base import register_kernel

__all__ = [
    "LinearAttentionState",
    "LinearKernel",
    "causal_linear_attention",
    "elu_feature_map",
    "linear_attention",
    "linear_attention_step",
    "linear_attention_weights",
]


def elu_feature_map(x: Tensor) -> Tensor:
    """The paper's feature map ``φ(x) = elu(x) + 1`` (positive, so denominators are too).

    Computed as ``x + 1`` for x > 0 and ``exp(x)`` otherwise: ``elu(x) + 1`` literally
    rounds to exactly 0 below x ≈ −17 in float32 (``(eˣ − 1) + 1``).
    """
    return torch.where(x > 0, x + 1.0, torch.exp(x.clamp_max(0.0)))


def linear_attention(
    phi_q: Tensor,
    phi_k: Tensor,
    v: Tensor,
    *,
    key_padding_mask: Tensor | None = None,
    causal: bool = False,
    chunk_size: int = 64,
    eps: float = 1e-6,
) -> Tensor:
    """Attention with similarity ``φ(q)ᵀφ(k)``, given the features.

    Args:
        phi_q: query features ``(B, H, T, F)``, non-negative.
        phi_k: key features ``(B, H, S, F)``, non-negative.
        v: values ``(B, H, S, Dv)``.
        key_padding_mask: ``(B, S)``, True at padding; padded keys contribute nothing.
        causal: query i sees keys j ≤ i (bottom-right aligned when T < S).
        chunk_size: positions per chunk of the causal form.
        eps: floor of the denominator (0: none); a query with no key to attend to gets 0.

    Returns:
        ``(B, H, T, Dv)``.
    """
    if key_padding_mask is not None:  # so that padding holding inf/NaN cannot leak in
        phi_k, v = zero_padding(phi_k, key_padding_mask), zero_padding(v, key_padding_mask)
    if causal:
        return causal_linear_attention(phi_q, phi_k, v, chunk_size=chunk_size, eps=eps)
    s = torch.einsum("bhsf,bhse->bhfe", phi_k, v)  # (B, H, F, Dv)
    z = phi_k.sum(dim=2)  # (B, H, F)
    numerator = phi_q @ s  # (B, H, T, Dv)
    denominator = torch.einsum("bhtf,bhf->bht", phi_q, z)
    return _divide(numerator, denominator, eps)


def linear_attention_weights(
    phi_q: Tensor,
    phi_k: Tensor,
    *,
    key_padding_mask: Tensor | None = None,
    causal: bool = False,
    eps: float = 1e-6,
) -> Tensor:
    """The attention matrix linear attention implies: ``linear_attention(…) = A @ v``.

    ``A_ij = φ(q_i)ᵀφ(k_j) / Σ_j' φ(q_i)ᵀφ(k_j')`` over the visible keys j' (not padding;
    j' ≤ i when causal), with the same floored denominator as :func:`linear_attention`.
    It costs the O(T·S) memory linear attention avoids: for attention maps only.

    Args:
        phi_q: ``(B, H, T, F)``; phi_k: ``(B, H, S, F)``, non-negative features.
        key_padding_mask: ``(B, S)``, True at padding (weight 0).
        causal: query i sees keys j ≤ i (bottom-right aligned when T < S).
        eps: floor of the denominator.

    Returns:
        ``(B, H, T, S)``; rows sum to 1, or are 0 for a query with no visible key.
    """
    if key_padding_mask is not None:
        phi_k = zero_padding(phi_k, key_padding_mask)
    similarity = phi_q @ phi_k.transpose(-1, -2)  # (B, H, T, S)
    if causal:
        visible = causal_mask(phi_q.shape[2], phi_k.shape[2], phi_q.device)
        similarity = similarity.masked_fill(~visible, 0.0)
    return _divide(similarity, similarity.sum(dim=-1), eps)


def causal_linear_attention(
    phi_q: Tensor, phi_k: Tensor, v: Tensor, *, chunk_size: int = 64, eps: float = 1e-6
) -> Tensor:
    """Causal linear attention, ``out_i = φ(q_i)ᵀ s_i / φ(q_i)ᵀ z_i`` with prefix sums
    ``s_i = Σ_{j≤i} φ(k_j) v_jᵀ``, ``z_i = Σ_{j≤i} φ(k_j)``, computed chunk by chunk.

    Within a chunk the pairs j ≤ i are a masked ``c × c`` product; the state entering each
    chunk is an exclusive cumulative sum of the per-chunk ``φ(k)ᵀv`` over chunks. Memory:
    O(L·c + (L/c)·F·Dv), time O(L·c·(F + Dv) + L·F·Dv).

    Args:
        phi_q: ``(B, H, T, F)``; phi_k: ``(B, H, S, F)``; v: ``(B, H, S, Dv)`` with T ≤ S
            (the first S − T keys are visible to every query, as in incremental decoding).
        chunk_size: c.
        eps: floor of the denominator.

    Returns:
        ``(B, H, T, Dv)``.
    """
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be >= 1, got {chunk_size}")
    num_queries, num_keys = phi_q.shape[2], phi_k.shape[2]
    if num_queries > num_keys:
        raise ValueError(f"causal attention needs T <= S, got T={num_queries}, S={num_keys}")
    prefix = num_keys - num_queries
    # Keys before the first query are seen by all queries: they form the initial state.
    s0 = torch.einsum("bhsf,bhse->bhfe", phi_k[:, :, :prefix], v[:, :, :prefix])
    z0 = phi_k[:, :, :prefix].sum(dim=2)
    q = _chunks(phi_q, chunk_size)  # (B, H, n, c, F)
    k = _chunks(phi_k[:, :, prefix:], chunk_size)
    v = _chunks(v[:, :, prefix:], chunk_size)  # (B, H, n, c, Dv)

    chunk_s = torch.einsum("bhncf,bhnce->bhnfe", k, v)  # (B, H, n, F, Dv)
    chunk_z = k.sum(dim=3)  # (B, H, n, F)
    s = s0[:, :, None] + _exclusive_cumsum(chunk_s)  # state entering each chunk
    z = z0[:, :, None] + _exclusive_cumsum(chunk_z)

    c = q.shape[3]
    scores = (q @ k.transpose(-1, -2)).tril()  # (B, H, n, c, c): pairs j ≤ i within a chunk
    numerator = scores @ v + q @ s
    denominator = scores.sum(dim=-1) + torch.einsum("bhncf,bhnf->bhnc", q, z)
    out = _divide(numerator, denominator, eps)
    batch, heads, n = out.shape[:3]
    return out.reshape(batch, heads, n * c, -1)[:, :, :num_queries]


def _divide(numerator: Tensor, denominator: Tensor, eps: float) -> Tensor:
    """``numerator / denominator[..., None]`` with the denominator floored at ``eps``.

    A denominator of exactly 0 means no key was visible (its numerator is 0 too): divide by
    1 there instead, so the output is 0 and no gradient is 0/0.
    """
    safe = torch.where(denominator > 0, denominator.clamp_min(eps), 1.0)
    return numerator / safe[..., None]


def _chunks(x: Tensor, chunk_size: int) -> Tensor:
    """``(B, H, L, E)`` → ``(B, H, n, c, E)``, zero-padded at the end to n·c positions."""
    length = x.shape[2]
    c = max(1, min(chunk_size, length))
    n = -(-length // c)
    x = F.pad(x, (0, 0, 0, n * c - length))
    return x.reshape(*x.shape[:2], n, c, x.shape[-1])


def _exclusive_cumsum(x: Tensor) -> Tensor:
    """Σ over chunks strictly before each chunk (dim 2)."""
    shifted = torch.cat([torch.zeros_like(x[:, :, :1]), x[:, :, :-1]], dim=2)
    return shifted.cumsum(dim=2)


def attend_with_features(
    phi_q: Tensor,
    phi_k: Tensor,
    v: Tensor,
    request: AttentionRequest,
    *,
    chunk_size: int,
    eps: float,
) -> tuple[Tensor, Tensor | None]:
    """Linear attention with given features for a kernel's request: ``(out, A or None)``."""
    pad, causal = request.key_padding_mask, request.causal
    out = linear_attention(
        phi_q, phi_k, v, key_padding_mask=pad, causal=causal, chunk_size=chunk_size, eps=eps
    )
    if not request.need_weights:
        return out, None
    return out, linear_attention_weights(phi_q, phi_k, key_padding_mask=pad, causal=causal, eps=eps)


@dataclass
class LinearAttentionState:
    """The RNN state of causal linear attention after some tokens.

    Attributes:
        s: ``(B, H, F, Dv)``: Σ_j φ(k_j) v_jᵀ.
        z: ``(B, H, F)``: Σ_j φ(k_j).
    """

    s: Tensor
    z: Tensor


def linear_attention_step(
    phi_q: Tensor,
    phi_k: Tensor,
    v: Tensor,
    state: LinearAttentionState,
    *,
    key_padding_mask: Tensor | None = None,
    eps: float = 1e-6,
) -> tuple[Tensor, LinearAttentionState]:
    """One token of causal linear attention, given its features.

    Args:
        phi_q: ``(B, H, F)``; phi_k: ``(B, H, F)``; v: ``(B, H, Dv)``.
        state: the state after the previous tokens.
        key_padding_mask: ``(B,)``, True where this token is padding (not added).
        eps: floor of the denominator.

    Returns:
        ``(out (B, H, Dv), state after this token)``.
    """
    if key_padding_mask is not None:
        pad = key_padding_mask[:, None, None]
        phi_k = phi_k.masked_fill(pad, 0.0)
        v = v.masked_fill(pad, 0.0)
    s = state.s + phi_k[..., :, None] * v[..., None, :]
    z = state.z + phi_k
    numerator = torch.einsum("bhf,bhfe->bhe", phi_q, s)
    denominator = (phi_q * z).sum(dim=-1)
    return _divide(numerator, denominator, eps), LinearAttentionState(s, z)


class FeatureMapKernel(AttentionKernel):
    """Linear attention ``φ(q)ᵀφ(k)`` with a subclass's feature map φ (:meth:`features`):
    causal, with the implied weights when asked for, and incremental. It never forms the
    ``(T, S)`` scores, so it takes no mask and no other score.

    Subclasses set ``chunk_size`` (positions per chunk of the causal form) and ``eps``
    (floor of the denominator).
    """

    supports_causal = True
    supports_weights = True  # the implied matrix, formed only when asked for
    supports_cache = True  # causal with T < S is bottom-right aligned: the last T queries
    reasons: ClassVar[dict[Capability, str]] = {
        "mask": "it never forms the (T, S) scores a mask would change",
    }
    chunk_size: int
    eps: float

    @abc.abstractmethod
    def features(self, q: Tensor, k: Tensor, request: AttentionRequest) -> tuple[Tensor, Tensor]:
        """``(φ(q), φ(k))`` of queries ``(B, H, T, D)`` and keys ``(B, H, S, D)``."""

    def attend(
        self, q: Tensor, k: Tensor, v: Tensor, request: AttentionRequest
    ) -> tuple[Tensor, Tensor | None]:
        phi_q, phi_k = self.features(q, k, request)
        return attend_with_features(
            phi_q, phi_k, v, request, chunk_size=self.chunk_size, eps=self.eps
        )


@register_kernel
class LinearKernel(FeatureMapKernel):
    """Linear attention with ``φ(x) = elu(x) + 1`` (Katharopoulos et al. 2020).

    Not softmax attention: a different similarity, learned around. Cost O(L·D·Dv) time,
    O(L·(D + Dv) + D·Dv) memory (causal: O(L·c + (L/c)·D·Dv) with chunk c).

    Args:
        chunk_size: positions per chunk of the causal parallel form.
        eps: floor of the denominator.
    """

    name = "linear"
    reasons: ClassVar[dict[Capability, str]] = {
        **FeatureMapKernel.reasons,
        "scores": "its similarity is the kernel φ(q)ᵀφ(k) with φ = elu + 1",
    }

    def __init__(self, chunk_size: int = 64, eps: float = 1e-6) -> None:
        super().__init__()
        if chunk_size < 1:
            raise ValueError(f"chunk_size must be >= 1, got {chunk_size}")
        self.chunk_size = chunk_size
        self.eps = eps

    def features(self, q: Tensor, k: Tensor, request: AttentionRequest) -> tuple[Tensor, Tensor]:
        return elu_feature_map(q), elu_feature_map(k)

    @staticmethod
    def initial_state(q: Tensor, v: Tensor) -> LinearAttentionState:
        """The empty state for queries like ``q (B, H, ·, D)`` and values ``v (B, H, ·, Dv)``."""
        batch, heads, head_dim = q.shape[0], q.shape[1], q.shape[-1]
        s = q.new_zeros(batch, heads, head_dim, v.shape[-1])
        return LinearAttentionState(s=s, z=q.new_zeros(batch, heads, head_dim))

    def step(
        self,
        q_t: Tensor,
        k_t: Tensor,
        v_t: Tensor,
        state: LinearAttentionState,
        *,
        key_padding_mask: Tensor | None = None,
    ) -> tuple[Tensor, LinearAttentionState]:
        """The RNN form: attend from token t to tokens ≤ t in O(D·Dv), whatever t is.

        Args:
            q_t: the query of token t, ``(B, H, D)``.
            k_t: its key, ``(B, H, D)``.
            v_t: its value, ``(B, H, Dv)``.
            state: from :meth:`initial_state` or the previous step.
            key_padding_mask: ``(B,)``, True where token t is padding.

        Returns:
            ``(out_t (B, H, Dv), new state)``.
        """
        return linear_attention_step(
            elu_feature_map(q_t),
            elu_feature_map(k_t),
            v_t,
            state,
            key_padding_mask=key_padding_mask,
            eps=self.eps,
        )

    def recurrent(
        self, q: Tensor, k: Tensor, v: Tensor, *, key_padding_mask: Tensor | None = None
    ) -> Tensor:
        """Causal attention over ``(B, H, L, ·)`` tensors by :meth:`step`, one token at a time;
        equals ``self(q, k, v, causal=True)[0]``. Returns ``(B, H, L, Dv)``."""
        state = self.initial_state(q, v)
        outputs = []
        for t in range(q.shape[2]):
            pad_t = None if key_padding_mask is None else key_padding_mask[:, t]
            out_t, state = self.step(
                q[:, :, t], k[:, :, t], v[:, :, t], state, key_padding_mask=pad_t
            )
            outputs.append(out_t)
        return torch.stack(outputs, dim=2)
