"""Multi-head self- and cross-attention (lecture 000, §Multi-head Self-attention).

Each head h has its own q^{i,h} = W^{q,h} a^i, k^{i,h}, v^{i,h}; head outputs b^{i,h} are
concatenated and mixed by W^O: b^i = W^O [b^{i,1}; b^{i,2}; …]. All heads' projections
are one ``nn.Linear`` each (``q_proj``, ``k_proj``, ``v_proj``), reshaped to
``(B, H, L, D)`` and handed to an attention kernel
(:class:`~selfattn.attention.kernel.AttentionKernel`; the variants are
:mod:`selfattn.kernels`): the dense one, :func:`selfattn.attention` itself, unless another
is given. What the kernel cannot do (weights, masks, a cache, …) it refuses in one line.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import Tensor, nn

from selfattn.attention.cache import KVCache
from selfattn.attention.dense import DenseKernel
from selfattn.attention.kernel import AttentionKernel, default_scores
from selfattn.attention.normalizers import NormalizerFn
from selfattn.attention.packed_linear import plain
from selfattn.attention.scores import AdditiveScore, ScoreFn, default_scale
from selfattn.positional.base import RelativePositional


class MultiHeadAttention(nn.Module):
    """Multi-head attention with a choice of score, normaliser, heads and positions.

    Args:
        embed_dim: E, size of the query-side input and of the output.
        num_heads: H, number of query heads.
        kdim: size of the key-side input (default E); differs for cross-attention.
        vdim: size of the value-side input (default ``kdim``).
        num_kv_heads: key/value heads (default H). Fewer heads share keys and values
            across groups of query heads (grouped-query; 1 = multi-query).
        head_dim: D per head (default E / H).
        bias: biases in the four projections.
        dropout: dropout on the attention weights during training, of the dense kernel
            built when ``kernel`` is ``None`` (a kernel given brings its own).
        score: ``"scaled_dot"``, ``"dot"``, ``"additive"`` (a learned
            :class:`AdditiveScore`, shared by the heads) or a callable.
        normalizer: ``"softmax"``, ``"relu"``, ``"sigmoid"`` or a callable.
        include_self: False forbids each position attending to itself.
        positional: a :class:`~selfattn.positional.base.RelativePositional` acting inside
            attention (relative, rotary, ALiBi); ``None`` for none.
        kernel: the :class:`~selfattn.kernels.AttentionKernel` that attends over the
            projected heads (window, linear, Performer, Linformer, LSH, …); ``None``: a
            :class:`~selfattn.kernels.DenseKernel` with ``dropout``. Options it lacks the
            capability for (another score, grouped-query heads) are refused here, and
            per call (weights, masks, a cache, …) in forward, in one line.
    """

    def __init__(
        self,
        embed_dim: int,
        num_heads: int,
        *,
        kdim: int | None = None,
        vdim: int | None = None,
        num_kv_heads: int | None = None,
        head_dim: int | None = None,
        bias: bool = True,
        dropout: float = 0.0,
        score: str | ScoreFn = "scaled_dot",
        normalizer: str | NormalizerFn = "softmax",
        include_self: bool = True,
        positional: RelativePositional | None = None,
        kernel: nn.Module | None = None,
    ) -> None:
        super().__init__()
        if head_dim is None:
            if embed_dim % num_heads:
                raise ValueError(
                    f"embed_dim ({embed_dim}) must be divisible by num_heads ({num_heads}) "
                    "unless head_dim is given"
                )
            head_dim = embed_dim // num_heads
        num_kv_heads = num_kv_heads or num_heads
        if num_heads % num_kv_heads:
            raise ValueError(
                f"num_heads ({num_heads}) must be a multiple of num_kv_heads ({num_kv_heads})"
            )
        kdim = kdim or embed_dim
        vdim = vdim or kdim
        if kernel is None:
            kernel = DenseKernel(dropout=dropout)
        if not isinstance(kernel, AttentionKernel):
            raise TypeError(
                f"kernel must be an AttentionKernel (selfattn.kernels), got {type(kernel).__name__}"
            )
        # What every call would ask of the kernel: refused now rather than at the first call.
        if not default_scores(score, normalizer, include_self):
            kernel.require("scores")
        if num_kv_heads != num_heads:
            kernel.require("gqa")
        self.embed_dim, self.num_heads, self.head_dim = embed_dim, num_heads, head_dim
        self.num_kv_heads = num_kv_heads
        self.normalizer = normalizer
        self.include_self = include_self
        self.q_proj = nn.Linear(embed_dim, num_heads * head_dim, bias=bias)
        self.k_proj = nn.Linear(kdim, num_kv_heads * head_dim, bias=bias)
        self.v_proj = nn.Linear(vdim, num_kv_heads * head_dim, bias=bias)
        self.out_proj = nn.Linear(num_heads * head_dim, embed_dim, bias=bias)
        self.score: str | ScoreFn | AdditiveScore = (
            AdditiveScore(head_dim) if score == "additive" else score
        )
        self.positional = positional
        self.kernel: AttentionKernel = kernel
        self.reset_parameters()

    @property
    def dropout(self) -> float:
        """Dropout on the attention weights in training: the kernel's (0 if it has none)."""
        return float(getattr(self.kernel, "dropout", 0.0))

    def reset_parameters(self) -> None:
        """Xavier-uniform projections with zero biases (Vaswani et al. 2017; the same
        scheme as ``torch.nn.MultiheadAttention``, whose fused in-projection this
        reproduces per projection: ``bound = sqrt(6 / (E + 3E))``)."""
        for proj in (self.q_proj, self.k_proj, self.v_proj):
            fan_in = proj.weight.shape[1]
            bound = math.sqrt(6.0 / (fan_in + 3 * proj.weight.shape[0]))
            nn.init.uniform_(proj.weight, -bound, bound)
        for proj in (self.q_proj, self.k_proj, self.v_proj, self.out_proj):
            if proj.bias is not None:
                nn.init.zeros_(proj.bias)

    # ------------------------------------------------------------------ forward

    def forward(
        self,
        query: Tensor,
        key: Tensor | None = None,
        value: Tensor | None = None,
        *,
        key_padding_mask: Tensor | None = None,
        mask: Tensor | None = None,
        causal: bool = False,
        window: int | None = None,
        need_weights: bool = False,
        average_weights: bool = True,
        cache: KVCache | None = None,
    ) -> tuple[Tensor, Tensor | None]:
        """Attend from ``query`` to ``key``/``value`` (self-attention when they are omitted).

        A mask (relative positional score biases included), a window, weights and a cache
        are capabilities of the kernel: one it lacks is refused in one line (see
        :class:`~selfattn.kernels.AttentionKernel`); the dense kernel has them all.

        Args:
            query: ``(B, T, E)``.
            key: ``(B, S, kdim)``; defaults to ``query``.
            value: ``(B, S, vdim)``; defaults to ``key``.
            key_padding_mask: ``(B, S)`` boolean, True at padding.
            mask: boolean (True = may attend) or additive float mask broadcastable to
                ``(B, H, T, S)``; a 2-D ``(T, S)`` mask applies to every batch and head.
            causal: decoder-style masking (no attending to later positions).
            window: truncated attention to |i − j| ≤ window (the window kernel: the
                narrower of this and its own).
            need_weights: also return attention weights (for an approximating kernel, the
                matrix it implies).
            average_weights: average the weights over heads ``(B, T, S)`` rather than
                per head ``(B, H, T, S)``.
            cache: incremental decoding. A growing :class:`KVCache` receives the keys and
                values of ``query``'s positions and attention covers every cached position
                (the queries being the last ones; masks then refer to all S keys). A
                static cache projects ``key``/``value`` once and reuses them afterwards.

        Returns:
            ``(output (B, T, E), weights or None)``.
        """
        if query.dim() != 3:
            raise ValueError(f"query must have shape (B, T, E), got {tuple(query.shape)}")
        if query.shape[-1] != self.embed_dim:
            raise ValueError(
                f"query has {query.shape[-1]} features but embed_dim is {self.embed_dim}"
            )
        if cache is not None:
            self.kernel.require("cache")
        reuse = cache is not None and cache.static and cache.key is not None
        linears = None if cache is None else cache.linears
        project = plain if linears is None else linears
        if linears is not None and key is None and value is None:  # a decoding step's own
            q, k, v = linears.stacked((self.q_proj, self.k_proj, self.v_proj), query)
        else:
            q = project(self.q_proj, query)
            if not reuse:  # a memory's keys and values: projected once per decode, plainly
                key = query if key is None else key
                value = key if value is None else value
                k, v = self.k_proj(key), self.v_proj(value)
        q = self._split_heads(q, self.num_heads)  # (B, H, T, D)
        if reuse:
            assert cache is not None and cache.key is not None and cache.value is not None
            k, v = cache.key, cache.value  # (B, Hk, S, D), projected on the first step
        else:
            k = self._split_heads(k, self.num_kv_heads)  # (B, Hk, S, D)
            v = self._split_heads(v, self.num_kv_heads)  # (B, Hk, S, D)

        relative = self.positional
        wants_weights = need_weights or (relative is not None and relative.needs_weights)
        past = cache.length if cache is not None and not cache.static else 0
        if relative is not None:
            # The new keys sit at positions past … past + S_new - 1; queries are the last T.
            end = past + k.shape[2]
            q_pos = torch.arange(end - q.shape[2], end, device=q.device)
            q, k = relative.rotate(q, k, q_pos, torch.arange(past, end, device=q.device))
            k_pos = torch.arange(end, device=q.device)
        if cache is not None and not reuse:
            k, v = cache.append(k, v)
        if relative is not None:
            scale = default_scale(self.score, self.head_dim)
            mask = _add_bias(mask, relative.score_bias(q, q_pos, k_pos, scale), q.dtype)

        out, weights = self.kernel(
            q,
            k,
            v,
            key_padding_mask=key_padding_mask,
            mask=mask,
            # One query bottom-right aligned sees every key: the causal mask is a no-op then.
            causal=causal and q.shape[2] > 1,
            window=window,
            need_weights=wants_weights,
            score=self.score,
            normalizer=self.normalizer,
            include_self=self.include_self,
        )
        if relative is not None and weights is not None:
            term = relative.value_term(weights, q_pos, k_pos)
            if term is not None:
                out = out + term
        out = project(self.out_proj, out.transpose(1, 2).flatten(2))  # (B, T, H·D) → (B, T, E)
        if not need_weights or weights is None:
            return out, None
        return out, weights.mean(dim=1) if average_weights else weights

    def _split_heads(self, x: Tensor, heads: int) -> Tensor:
        """``(B, L, heads·D)`` → ``(B, heads, L, D)``."""
        return x.unflatten(-1, (heads, self.head_dim)).transpose(1, 2)

    # ------------------------------------------------------------------ interop

    @classmethod
    def from_torch(cls, module: nn.MultiheadAttention, **options: Any) -> MultiHeadAttention:
        """An equivalent module with the weights of a ``torch.nn.MultiheadAttention``.

        The result is batch-first whatever ``module.batch_first`` says. ``add_bias_kv`` and
        ``add_zero_attn`` have no counterpart here and are refused.
        """
        if module.bias_k is not None or module.add_zero_attn:
            raise ValueError("from_torch: add_bias_kv / add_zero_attn are not supported")
        has_bias = module.in_proj_bias is not None
        new = cls(
            module.embed_dim,
            module.num_heads,
            kdim=module.kdim,
            vdim=module.vdim,
            bias=has_bias,
            dropout=module.dropout,
            **options,
        ).to(module.out_proj.weight.device, module.out_proj.weight.dtype)
        embed = module.embed_dim
        with torch.no_grad():
            if module._qkv_same_embed_dim:
                weights = module.in_proj_weight.split(embed, dim=0)
            else:
                weights = (module.q_proj_weight, module.k_proj_weight, module.v_proj_weight)
            projections = (new.q_proj, new.k_proj, new.v_proj)
            for proj, weight in zip(projections, weights, strict=True):
                proj.weight.copy_(weight)
            if has_bias:
                for proj, b in zip(projections, module.in_proj_bias.split(embed), strict=True):
                    proj.bias.copy_(b)
                new.out_proj.bias.copy_(module.out_proj.bias)
            new.out_proj.weight.copy_(module.out_proj.weight)
        return new


def _add_bias(mask: Tensor | None, bias: Tensor | None, dtype: torch.dtype) -> Tensor | None:
    """Merge a positional score bias into the user's mask (boolean or additive)."""
    if bias is None:
        return mask
    bias = bias.to(dtype)
    if mask is None:
        return bias
    if mask.dtype == torch.bool:
        return bias.masked_fill(~mask, float("-inf"))
    return bias + mask
