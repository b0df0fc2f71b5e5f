"""Linear layers for a decoding step's few rows, with each weight laid out once per decode.

A cached decoding step multiplies a handful of rows (the batch, or batch × beam) by every
weight matrix of the decoder and by the vocabulary projection. With so few rows the
product is bound by reading the weight, and a general matrix product re-lays out (packs)
the weight on every call. PyTorch's oneDNN linear takes a weight packed ahead of time
(``torch.ops.mkldnn._reorder_linear_weight``, the op Inductor's CPU backend uses for
frozen weights), so a decode packs each weight once and reuses it for every step.

Where ``F.linear`` runs MKL, the packed weights make the vocabulary projection and the
feed-forward layers of a step with a few rows faster, and so the query, key and value
projections when stacked as one product; at one row oneDNN's fixed cost per call makes
them slower. The timings are in benchmarks/README.md (KV cache and decoding speed).

A row's result must not depend on the other rows of its step, or a decode would change
when rows that ended leave the batch (tests/decoding/test_static_cache.py checks that
exactly). oneDNN's products keep each row's result whatever the row count; MKL's do not
(1 row, 2–3 rows and 4 or more give three different roundings). So the rule is per
decode, not per call: a decode that has only ever had one row (batch-1 greedy) keeps
MKL's one-row products, the faster ones at one row (the vocabulary projection by an
``(E, V)`` copy of the weight); once a decode has had more than one row, every product of
a step goes through packed weights. The result is the same product with another
summation order (float32 rounding, ~1e-6 relative).

The packed path applies on the CPU to float32 inputs without autograd, when this PyTorch
build has oneDNN; anything else (float64, CUDA, gradients) runs ``F.linear`` unchanged.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn

_ROWS_HINT = 8  # the row count oneDNN lays the weight out for; any row count is accepted


def _available() -> bool:
    ops = torch.ops.mkldnn
    return (
        torch.backends.mkldnn.is_available()
        and hasattr(ops, "_reorder_linear_weight")
        and hasattr(ops, "_linear_pointwise")
    )


_AVAILABLE = _available()


def packable(x: Tensor, weight: Tensor) -> bool:
    """Whether ``x @ weight.T`` may take the packed path: :func:`onednn_usable`, and no
    autograd (a packed weight is a copy, outside the graph)."""
    return onednn_usable(x, weight) and not (
        torch.is_grad_enabled() and (x.requires_grad or weight.requires_grad)
    )


def _tracked(x: Tensor, layer: nn.Linear) -> bool:
    """Whether autograd records ``layer(x)`` (then only ``F.linear`` will do)."""
    return torch.is_grad_enabled() and (x.requires_grad or layer.weight.requires_grad)


def plain(layer: nn.Linear, x: Tensor) -> Tensor:
    """``layer(x)``: what a layer does outside a decode (the unpacked counterpart of
    :meth:`PackedLinears.__call__`)."""
    return layer(x)


class PackedLinears:
    """The packed weights of the linear layers one decode has used (made on first use).

    A decode's weights do not change, so each layer's weight is packed once; a new decode
    (a new :class:`~selfattn.attention.cache.DecoderCache`) packs afresh.
    """

    def __init__(self) -> None:
        self._packed: dict[nn.Linear | tuple[nn.Linear, ...], _Packed] = {}
        self._many_rows = False  # has this decode had more than one row?
        self._usable: bool | None = None  # packable inputs, decided on the first call
        # One-row decodes' widening layers and stacked Q/K/V, laid out (in, Σ out).
        self._transposed: dict[tuple[nn.Linear, ...], _Packed] = {}

    def applies(self, x: Tensor, weight: Tensor) -> bool:
        """Whether ``x`` times ``weight`` takes the packed path: :func:`packable`, and this
        decode has had more than one row (``x`` included)."""
        if not self._many_rows:
            if x.numel() <= x.shape[-1]:
                return False
            self._many_rows = True
        if self._usable is None:  # device and dtype: the same for every step of a decode
            self._usable = packable(x.detach(), weight.detach())
        return self._usable and not (
            torch.is_grad_enabled() and (x.requires_grad or weight.requires_grad)
        )

    def __call__(self, layer: nn.Linear, x: Tensor) -> Tensor:
        """``layer(x)`` for ``x`` ``(..., in)``: by the packed weight when it
        :meth:`applies`; in a one-row decode on the CPU, a widening layer (more outputs
        than inputs) by an ``(in, out)`` copy of its weight; else ``F.linear``."""
        if not self.applies(x, layer.weight):
            widening = layer.out_features > layer.in_features
            if self._many_rows or not widening or x.device.type != "cpu" or _tracked(x, layer):
                return F.linear(x, layer.weight, layer.bias)
            return self._rows_by((layer,), x)  # 123 → 51 µs for 256 → 1,024
        entry = self._packed.get(layer)
        if entry is None:
            entry = self._packed[layer] = _pack((layer,))
        return torch.ops.mkldnn._linear_pointwise(x, entry.weight, entry.bias, "none", [], "")

    def _rows_by(self, layers: tuple[nn.Linear, ...], x: Tensor) -> Tensor:
        """``x`` ``(..., in)`` for a one-row decode times the weights of ``layers``
        stacked and laid out ``(in, Σ out)``, made once: one MKL product ``(..., Σ out)``."""
        entry = self._transposed.get(layers)
        if entry is None:
            stacked = _stack(layers)
            entry = self._transposed[layers] = stacked._replace(
                weight=stacked.weight.t().contiguous()
            )
        rows = x.reshape(-1, x.shape[-1])
        out = (
            rows @ entry.weight
            if entry.bias is None
            else torch.addmm(entry.bias, rows, entry.weight)
        )
        return out.view(*x.shape[:-1], out.shape[-1])

    def stacked(self, layers: tuple[nn.Linear, ...], x: Tensor) -> tuple[Tensor, ...]:
        """``tuple(layer(x) for layer in layers)`` for layers that read the same input (a
        self-attention's query, key and value projections), as one product by their weights
        stacked and packed once; in a one-row decode on the CPU, by their weights stacked
        once and laid out ``(in, Σ out)``."""
        if not self.applies(x, layers[0].weight):
            if self._many_rows or x.device.type != "cpu" or _tracked(x, layers[0]):
                return tuple(F.linear(x, layer.weight, layer.bias) for layer in layers)
            # One product for Q, K and V: ~5 % of a batch-1 greedy step against three.
            return self._rows_by(layers, x).split([layer.out_features for layer in layers], dim=-1)
        entry = self._packed.get(layers)
        if entry is None:
            entry = self._packed[layers] = _pack(layers)
        out = torch.ops.mkldnn._linear_pointwise(x, entry.weight, entry.bias, "none", [], "")
        return out.split(entry.sizes, dim=-1)


class _Packed(NamedTuple):
    weight: Tensor  # the stacked weights: (Σ out, in), packed by oneDNN, or (in, Σ out)
    bias: Tensor | None
    sizes: list[int]  # each layer's out_features


def _pack(layers: tuple[nn.Linear, ...]) -> _Packed:
    """The weights of ``layers`` (same input size and dtype) stacked and packed."""
    stacked = _stack(layers)
    packed = torch.ops.mkldnn._reorder_linear_weight(stacked.weight, _ROWS_HINT)
    return stacked._replace(weight=packed)


def _stack(layers: tuple[nn.Linear, ...]) -> _Packed:
    """The weights of ``layers`` (same input size and dtype) stacked ``(Σ out, in)``, and
    their biases (zeros for a layer without one; ``None`` if none has one)."""
    weights = [layer.weight.detach() for layer in layers]
    weight = weights[0] if len(weights) == 1 else torch.cat(weights)
    bias = None
    if any(layer.bias is not None for layer in layers):
        bias = torch.cat(
            [
                layer.bias.detach() if layer.bias is not None else w.new_zeros(w.shape[0])
                for layer, w in zip(layers, weights, strict=True)
            ]
        )
    return _Packed(weight, bias, [w.shape[0] for w in weights])


# ---------------------------------------------------------------- training (model.linear_layers)


def onednn_usable(x: Tensor, weight: Tensor) -> bool:
    """Whether oneDNN's linear can take ``x @ weight.T``: CPU float32, oneDNN built in."""
    return (
        _AVAILABLE
        and bool(torch.backends.mkldnn.enabled)
        and x.device.type == "cpu"
        and x.dtype == torch.float32
        and weight.dtype == torch.float32
    )


@torch.library.custom_op("selfattn::onednn_linear", mutates_args=())
def onednn_linear(x: Tensor, weight: Tensor, bias: Tensor | None) -> Tensor:
    """``x @ weight.T + bias`` by oneDNN's linear where :func:`onednn_usable` (else
    ``F.linear``), as an operator of its own: ``torch.compile`` keeps it whole (Inductor
    calls it as an external kernel and fuses the elementwise work around it), and its
    backward is :func:`_onednn_linear_backward`, traced and compiled with the rest."""
    if onednn_usable(x, weight):
        return torch.ops.mkldnn._linear_pointwise(x, weight, bias, "none", [], "")
    return F.linear(x, weight, bias)


@onednn_linear.register_fake
def _onednn_linear_shape(x: Tensor, weight: Tensor, bias: Tensor | None) -> Tensor:
    return x.new_empty((*x.shape[:-1], weight.shape[0]))


def _onednn_linear_saves(
    ctx: torch.autograd.function.FunctionCtx,
    inputs: tuple[Tensor, Tensor, Tensor | None],
    output: Tensor,
) -> None:
    x, weight, bias = inputs
    ctx.save_for_backward(x, weight)
    ctx.has_bias = bias is not None  # type: ignore[attr-defined]


def _onednn_linear_backward(
    ctx: torch.autograd.function.FunctionCtx, grad: Tensor
) -> tuple[Tensor | None, Tensor | None, Tensor | None]:
    """The input gradient by oneDNN's linear too, times the weight laid out ``(in, out)``;
    the weight's gradient one matrix product (oneDNN's is no faster at K = B·L)."""
    x, weight = ctx.saved_tensors  # type: ignore[attr-defined]
    needs = ctx.needs_input_grad  # type: ignore[attr-defined]
    grad_x = grad_weight = grad_bias = None
    if needs[0]:
        grad_x = onednn_linear(grad, weight.t().contiguous(), None)
    rows = grad.reshape(-1, grad.shape[-1])
    if needs[1]:
        grad_weight = rows.t() @ x.reshape(-1, x.shape[-1])
    if ctx.has_bias and needs[2]:  # type: ignore[attr-defined]
        grad_bias = rows.sum(0)
    return grad_x, grad_weight, grad_bias


onednn_linear.register_autograd(_onednn_linear_backward, setup_context=_onednn_linear_saves)


class OneDNNLinear(nn.Linear):
    """``nn.Linear`` (same parameters, same state dict) whose training steps on the CPU in
    float32 run oneDNN's linear (``model.linear_layers = "onednn"``).

    Forward and input gradient by ``torch.ops.mkldnn._linear_pointwise``, faster than
    MKL's ``F.linear`` on training shapes (benchmarks/README.md, oneDNN linear layers);
    the weight gradient by one matrix product, which oneDNN did not speed up. The products
    round differently from ``F.linear`` (float32 rounding), so a run does not repeat one
    trained with PyTorch's linear. Evaluation, decoding, export and anything without
    gradients, and any other device or dtype, run ``F.linear`` unchanged.
    """

    def forward(self, input: Tensor) -> Tensor:
        if self.training and torch.is_grad_enabled() and onednn_usable(input, self.weight):
            return onednn_linear(input, self.weight, self.bias)
        return F.linear(input, self.weight, self.bias)
