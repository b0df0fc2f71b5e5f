"""A decoding step of a :class:`Seq2SeqTransformer` without the module machinery.

A cached step runs the decoder on one position per row, so its tensors are tiny and what
a step costs beyond its matrix products is mostly Python: a module call per block,
attention, projection, norm and feed-forward layer, each with its argument checks, masks
decided afresh and kernel dispatch (about 45 module calls and 900 aten ops per step of a
4-layer decoder). For the common decoder — dense softmax attention with the scaled dot
score, absolute or no positions, content cross-attention, the vocabulary output — that
is known once per decode, and :func:`lean_step` runs the same operations in the same order
straight from the layers' weights: the same products (a decode's
:class:`~selfattn.attention.packed_linear.PackedLinears`), the same fused attention
kernel, the same norms, into the same :class:`~selfattn.attention.cache.DecoderCache`. The
result is bit for bit ``model.decode(…, cache=cache)``'s (``tests/decoding/test_lean.py``),
so greedy, beam search and sampling keep their tokens and scores, and beam search's
reordering of the cache, which moves a ``DecoderCache``'s rows, is unchanged.

Anything else — another score, normaliser or kernel, relative positions, an alignment,
pointer or copy outputs, a source with no real token, training mode, forward hooks (the
modules are never called), autograd — takes ``model.decode``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import NamedTuple, Protocol, cast

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from selfattn.attention.cache import DecoderCache, KVCache
from selfattn.attention.dense import DenseKernel
from selfattn.attention.functional import zero_padding
from selfattn.attention.multihead import MultiHeadAttention
from selfattn.attention.packed_linear import PackedLinears, Projection, Projections
from selfattn.blocks.decoder_block import DecoderBlock
from selfattn.blocks.feedforward import FeedForward
from selfattn.models.decoder import Decoder
from selfattn.models.seq2seq_outputs import EncodedSource

#: ``(new ids (R, 1), sources, cache)`` → ``(R, V)`` next-token log-probabilities.
StepFn = Callable[[Tensor, EncodedSource, DecoderCache], Tensor]


class SteppedModel(Protocol):
    """What the lean step reads of a model that declares ``plain_decoder_step``
    (``Seq2SeqTransformer``): its decoder, its output kind and the ends of a step."""

    decoder: Decoder
    training: bool
    output: str

    def check_target_in(self, target_in: Tensor, encoded: EncodedSource, offset: int) -> None:
        """Refuse decoder inputs that do not fit the batch or the model's length."""

    def embed_target(self, ids: Tensor, encoded: EncodedSource) -> Tensor:
        """Decoder input vectors ``(B, T, E)`` for output ids ``(B, T)``."""

    def vocab_log_probs(self, hidden: Tensor, cache: DecoderCache | None = None) -> Tensor:
        """``(B, T, V)`` log-probabilities of the vocabulary output."""

    def modules(self) -> Iterator[nn.Module]:
        """Every module of the model."""


@dataclass(frozen=True)
class _Norm:
    """A ``LayerNorm``'s arguments, read once (``F.layer_norm`` is what the module runs)."""

    shape: tuple[int, ...]
    weight: Tensor | None
    bias: Tensor | None
    eps: float

    @classmethod
    def of(cls, norm: nn.LayerNorm) -> _Norm:
        return cls(tuple(norm.normalized_shape), norm.weight, norm.bias, norm.eps)

    def __call__(self, x: Tensor) -> Tensor:
        return F.layer_norm(x, self.shape, self.weight, self.bias, self.eps)


def _plain_attention(attention: nn.Module) -> bool:
    """Whether ``attention`` is the decoder's default: dense softmax over scaled dot
    products, every key allowed, no relative positions, no weight dropout in effect."""
    return (
        type(attention) is MultiHeadAttention
        and type(attention.kernel) is DenseKernel
        and attention.score == "scaled_dot"
        and attention.normalizer == "softmax"
        and attention.include_self
        and attention.positional is None
    )


def _plain_block(block: nn.Module) -> bool:
    return (
        type(block) is DecoderBlock
        and block.alignment is None
        and type(block.norm1) is nn.LayerNorm
        and type(block.feedforward) is FeedForward
        and _plain_attention(block.self_attn)
        and _plain_attention(block.cross_attn)
    )


def _hooked(modules: Iterator[nn.Module]) -> bool:
    """Whether a forward hook or pre-hook would see the model's module calls."""
    hooks = nn.modules.module
    if hooks._global_forward_hooks or hooks._global_forward_pre_hooks:
        return True
    return any(m._forward_hooks or m._forward_pre_hooks for m in modules)


def lean_step(model: object, encoded: EncodedSource) -> StepFn | None:
    """The lean step for decoding ``encoded`` with ``model``, or ``None`` where only
    ``model.decode`` will do (module docstring)."""
    if not getattr(type(model), "plain_decoder_step", False):
        return None
    model = cast(SteppedModel, model)
    if model.training or model.output != "vocab":
        return None
    decoder = model.decoder
    if type(decoder) is not Decoder or not all(_plain_block(b) for b in decoder.layers):
        return None
    if decoder.norm is not None and type(decoder.norm) is not nn.LayerNorm:
        return None
    if torch.is_grad_enabled() or _hooked(model.modules()):
        return None
    if not bool((~encoded.padding).any(dim=1).all()):  # a source of padding only
        return None
    return _LeanDecoder(model).step


class _Attention(NamedTuple):
    """What a step reads of a :class:`MultiHeadAttention`, read once."""

    module: MultiHeadAttention
    heads: int
    kv_heads: int
    dim: int
    scale: float

    @classmethod
    def of(cls, attention: MultiHeadAttention) -> _Attention:
        dim = attention.head_dim
        return cls(attention, attention.num_heads, attention.num_kv_heads, dim, 1 / math.sqrt(dim))


class _Layer(NamedTuple):
    """One block's settings and its products bound for the decode's rows
    (:meth:`PackedLinears.bind <selfattn.attention.packed_linear.PackedLinears.bind>`)."""

    pre: bool
    norms: tuple[_Norm, _Norm, _Norm]
    own: _Attention
    cross: _Attention
    qkv: Projections
    own_out: Projection
    cross_query: Projection
    cross_out: Projection
    ff_in: Projection
    ff_gate: Projection | None
    ff_out: Projection
    activation: Callable[[Tensor], Tensor] | None  # None: ``ff_in`` applies it (relu)


def _bind(block: DecoderBlock, linears: PackedLinears, x: Tensor) -> _Layer:
    """``block``'s settings and products for steps whose rows are like ``x``."""
    own, cross = block.self_attn, block.cross_attn
    ff = block.feedforward
    activation = ff.activation.function
    # An ungated relu goes into the product's own output (oneDNN's relu post-op).
    fused = ff.gate_proj is None and activation in (F.relu, torch.relu)
    return _Layer(
        pre=bool(block.config.norm_first),
        norms=(_Norm.of(block.norm1), _Norm.of(block.norm2), _Norm.of(block.norm3)),
        own=_Attention.of(own),
        cross=_Attention.of(cross),
        qkv=linears.bind_stacked((own.q_proj, own.k_proj, own.v_proj), x),
        own_out=linears.bind(own.out_proj, x),
        cross_query=linears.bind(cross.q_proj, x),
        cross_out=linears.bind(cross.out_proj, x),
        ff_in=linears.bind(ff.in_proj, x, relu=fused),
        ff_gate=None if ff.gate_proj is None else linears.bind(ff.gate_proj, x),
        ff_out=linears.bind(ff.out_proj, x),
        activation=None if fused else activation,
    )


class _LeanDecoder:
    """The weights and settings a step reads, gathered once per decode, and its products
    bound once per decode."""

    def __init__(self, model: SteppedModel) -> None:
        decoder = model.decoder
        self.model, self.decoder = model, decoder
        self.blocks = [cast(DecoderBlock, block) for block in decoder.layers]
        self.final = None if decoder.norm is None else _Norm.of(decoder.norm)
        self._layers: list[_Layer] = []
        self._bound_for: bool | None = None  # autograd on when the blocks were bound
        heads = {(b.self_attn.num_kv_heads, b.self_attn.head_dim) for b in self.blocks}
        self.same_heads = len(heads) == 1

    def layers(self, x: Tensor, linears: PackedLinears) -> list[_Layer]:
        """The blocks bound for steps whose rows are like ``x`` (bound again only should
        autograd be switched, which changes the products chosen)."""
        grad = torch.is_grad_enabled()
        if grad != self._bound_for:
            self._layers = [_bind(block, linears, x) for block in self.blocks]
            self._bound_for = grad
        return self._layers

    def step(self, ids: Tensor, encoded: EncodedSource, cache: DecoderCache) -> Tensor:
        """``model.decode(ids, encoded, cache=cache).log_probs[:, -1]``, the same operations."""
        model = self.model
        offset = cache.offset
        model.check_target_in(ids, encoded, offset)
        inputs = model.embed_target(ids, encoded)
        group = cache.group
        padding = encoded.padding if group == 1 else encoded.padding[::group]
        memory_padding = cache.memory_mask(padding)
        x = inputs if self.decoder.absolute is None else self.decoder.absolute(inputs, offset)
        layers = self.layers(x, cache.linears)
        if offset == 0 and cache.capacity is not None and not cache.layers and self.same_heads:
            heads = layers[0].own  # every layer's self-attention caches in one buffer
            cache.allocate(len(layers), x.new_empty(x.shape[0], heads.kv_heads, 1, heads.dim))
        memories = encoded.memories
        # One new position per row with room left: the self-attention caches' cheap write.
        room = ids.shape[1] == 1 and cache.capacity is not None and offset < cache.capacity
        for index, layer in enumerate(layers):
            memory = encoded.memory if memories is None else memories[index]
            own, cross = cache.layer(index)
            norm1, norm2, norm3 = layer.norms
            pre = layer.pre
            h = norm1(x) if pre else x
            q, k, v = layer.qkv(h)
            attended = _self_attention(layer, q, k, v, own, offset if room else None)
            x = x + attended if pre else norm1(x + attended)
            h = norm2(x) if pre else x
            attended = _cross_attention(layer, h, memory, memory_padding, cross, group)
            x = x + attended if pre else norm2(x + attended)
            h = norm3(x) if pre else x
            hidden = layer.ff_in(h)
            if layer.activation is not None:
                hidden = layer.activation(hidden)
            if layer.ff_gate is not None:
                hidden = hidden * layer.ff_gate(h)
            transformed = layer.ff_out(hidden)
            x = x + transformed if pre else norm3(x + transformed)
        if self.final is not None:
            x = self.final(x)
        cache.offset += x.shape[1]
        return model.vocab_log_probs(x, cache)[:, -1]


def _heads(x: Tensor, heads: int, head_dim: int) -> Tensor:
    """``(B, L, heads·D)`` → ``(B, heads, L, D)``."""
    return x.unflatten(-1, (heads, head_dim)).transpose(1, 2)


def _self_attention(
    layer: _Layer, q: Tensor, k: Tensor, v: Tensor, cache: KVCache, position: int | None
) -> Tensor:
    """Masked self-attention of the new positions (their projections ``q``, ``k``, ``v``)
    over the cached ones and themselves; ``position``: one new position per row, written
    there (:meth:`KVCache.write`) once the cache's buffers exist, else ``None``."""
    attention = layer.own
    heads, kv_heads, dim = attention.heads, attention.kv_heads, attention.dim
    k, v = _heads(k, kv_heads, dim), _heads(v, kv_heads, dim)
    if position is not None and cache.preallocated:
        keys, values = cache.write(position, k, v)
    else:
        keys, values = cache.append(k, v)
    out = F.scaled_dot_product_attention(
        _heads(q, heads, dim),
        keys,
        values,
        attn_mask=None,
        dropout_p=0.0,
        scale=attention.scale,
        enable_gqa=heads != kv_heads,
    )
    return layer.own_out(out.transpose(1, 2).flatten(2))


def _cross_attention(
    layer: _Layer,
    x: Tensor,
    memory: Tensor,
    padding: Tensor | None,
    cache: KVCache,
    group: int,
) -> Tensor:
    """Attention from the new positions ``x`` ``(R, 1, E)`` to the source.

    The source's keys and values are projected on the first step (their padding zeroed)
    and kept, one row per ``group`` consecutive decoder rows (beam search's beams of one
    example): a group's rows attend together, as ``group`` queries of one source, so the
    source's keys and values are stored and read once per example, not once per beam.
    When that is smaller than the query and output projections' weights, they are kept
    folded into those weights instead (:func:`_fold`).
    """
    attention = layer.cross
    module, heads, kv_heads, dim = (
        attention.module,
        attention.heads,
        attention.kv_heads,
        attention.dim,
    )
    rows = x.shape[0]
    if cache.key is None:
        source = memory if group == 1 else memory[::group]
        k = _heads(module.k_proj(source), kv_heads, dim)
        v = _heads(module.v_proj(source), kv_heads, dim)
        if padding is not None:
            k, v = zero_padding(k, padding), zero_padding(v, padding)
        if 2 * source.shape[0] * heads * source.shape[1] <= x.shape[-1]:
            _fold(module, k, v, padding, cache)
        else:
            cache.append(k, v)
    assert cache.key is not None and cache.value is not None
    if cache.folded:
        return _folded_attention(module, x, cache.key, cache.value)
    q = layer.cross_query(x)  # (R, 1, H·D)
    mask = None if padding is None else ~padding[:, None, None, :]
    out = F.scaled_dot_product_attention(
        q.view(rows // group, group, heads, dim).transpose(1, 2),  # (R / g, H, g, D)
        cache.key,
        cache.value,
        attn_mask=mask,
        dropout_p=0.0,
        scale=attention.scale,
        enable_gqa=heads != kv_heads,
    )
    return layer.cross_out(out.transpose(1, 2).reshape(rows, 1, heads * dim))


def _fold(
    attention: MultiHeadAttention, k: Tensor, v: Tensor, padding: Tensor | None, cache: KVCache
) -> None:
    """Keep the source's keys ``k`` and values ``v`` ``(G, Hk, S, D)`` multiplied into the
    query and output projections, in ``cache`` (``folded``).

    Head h's scores are ``(x Wq_hᵀ + bq_h) K_hᵀ / √D = x A_h + c_h`` with
    ``A_h = Wq_hᵀ K_hᵀ / √D`` ``(E, S)`` and ``c_h = bq_h K_hᵀ / √D`` (−inf at padding), and
    the output ``Σ_h p_h V_h Wo_hᵀ + bo = p B + bo``: per step two products with
    ``(E, H·S)`` and ``(H·S, E)`` matrices instead of two with ``(E, E)`` weights, fewer
    numbers to read while 2·G·H·S ≤ E (a short source at batch 1). The same sums,
    associated otherwise: float rounding apart, the same attention.
    """
    heads, dim = attention.num_heads, attention.head_dim
    k = k.repeat_interleave(heads // k.shape[1], dim=1)  # grouped-query: a key per head
    v = v.repeat_interleave(heads // v.shape[1], dim=1)
    groups, _, length, _ = k.shape
    scale = 1.0 / math.sqrt(dim)
    query, out = attention.q_proj, attention.out_proj
    embed = query.in_features
    a = torch.einsum("hde,ghsd->gehs", query.weight.view(heads, dim, embed), k) * scale
    c = k.new_zeros(groups, 1, heads, length)
    if query.bias is not None:
        c = torch.einsum("hd,ghsd->ghs", query.bias.view(heads, dim), k).unsqueeze(1) * scale
    if padding is not None:
        c = c.masked_fill(padding[:, None, None, :], float("-inf"))
    b = torch.einsum("ghsd,ehd->ghse", v, out.weight.view(out.out_features, heads, dim))
    cache.key = torch.cat([a.reshape(groups, embed, -1), c.reshape(groups, 1, -1)], dim=1)
    cache.value = b.reshape(groups, heads * length, out.out_features).contiguous()
    cache.static = cache.folded = True


def _folded_attention(
    attention: MultiHeadAttention, x: Tensor, key: Tensor, value: Tensor
) -> Tensor:
    """The cross-attention of ``x`` ``(R, 1, E)`` from the folded ``key`` ``(G, E + 1, H·S)``
    and ``value`` ``(G, H·S, E)`` (:func:`_fold`); rows come in G groups."""
    rows, embed = x.shape[0], x.shape[-1]
    groups = key.shape[0]
    scores = torch.baddbmm(key[:, embed:], x.view(groups, rows // groups, embed), key[:, :embed])
    weights = scores.unflatten(-1, (attention.num_heads, -1)).softmax(dim=-1).flatten(2)
    bias = attention.out_proj.bias
    out = torch.bmm(weights, value) if bias is None else torch.baddbmm(bias, weights, value)
    return out.view(rows, 1, -1)
