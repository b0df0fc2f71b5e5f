"""Linear layers for a decoding step's few rows, with each weight laid out once per decode.

A cached decoding step multiplies a handful of rows (the batch, or batch × beam) by every
weight matrix of the decoder and by the vocabulary projection. With so few rows the
product is bound by reading the weight, and a general matrix product re-lays out (packs)
the weight on every call. PyTorch's oneDNN linear takes a weight packed ahead of time
(``torch.ops.mkldnn._reorder_linear_weight``, the op Inductor's CPU backend uses for
frozen weights), so a decode packs each weight once and reuses it for every step.

Where ``F.linear`` runs MKL, the packed weights make every product of a step faster in a
decode, from one row up: the vocabulary projection, the feed-forward layers, and the query,
key and value projections stacked as one product. At one row a product alone is no
faster (oneDNN's fixed cost per call), but a whole batch-1 greedy decode is about 10 %
faster packed than with MKL's one-row products. The timings are in benchmarks/README.md
(KV cache and decoding speed).

A row's result must not depend on the other rows of its step, or a decode would change
when rows that ended leave the batch (tests/decoding/test_static_cache.py checks that
exactly). oneDNN's products keep each row's result whatever the row count, one row
included; MKL's do not (1 row, 2–3 rows and 4 or more give three different roundings).
So every product of a decode goes through packed weights, and a sentence decodes to the
same numbers alone or in any batch. The result is the same product as ``F.linear`` with
another summation order (float32 rounding, ~1e-6 relative).

The packed path applies on the CPU to float32 inputs without autograd, when this PyTorch
build has oneDNN; anything else (float64, CUDA, gradients) runs ``F.linear`` unchanged.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn

_ROWS_HINT = 8  # the row count oneDNN lays the weight out for; any row count is accepted
Projection = Callable[[Tensor], Tensor]
Projections = Callable[[Tensor], tuple[Tensor, ...]]


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


def plain(layer: nn.Linear, x: Tensor) -> Tensor:
    """``layer(x)``: what a layer does outside a decode (the unpacked counterpart of
    :meth:`PackedLinears.__call__`)."""
    return layer(x)


class PackedLinears:
    """The packed weights of the linear layers one decode has used (made on first use).

    A decode's weights do not change, so each layer's weight is packed once; a new decode
    (a new :class:`~selfattn.attention.cache.DecoderCache`) packs afresh (packed weights
    kept across decodes could go stale: a write through ``param.data`` does not move a
    parameter's version counter).
    """

    def __init__(self) -> None:
        self._packed: dict[nn.Linear | tuple[nn.Linear, ...], _Packed] = {}
        self._usable: bool | None = None  # packable inputs, decided on the first call

    def applies(self, x: Tensor, weight: Tensor) -> bool:
        """Whether ``x`` times ``weight`` takes the packed path (:func:`packable`)."""
        if self._usable is None:  # device and dtype: the same for every step of a decode
            self._usable = packable(x.detach(), weight.detach())
        return self._usable and not (
            torch.is_grad_enabled() and (x.requires_grad or weight.requires_grad)
        )

    def __call__(self, layer: nn.Linear, x: Tensor) -> Tensor:
        """``layer(x)`` for ``x`` ``(..., in)``: by the packed weight when it
        :meth:`applies`, else ``F.linear``."""
        return self.bind(layer, x)(x)

    def bind(self, layer: nn.Linear, x: Tensor, *, relu: bool = False) -> Projection:
        """``lambda t: self(layer, t)`` for the inputs of this decode's steps while they are
        like ``x`` (the same device, dtype and autograd state): the product
        :meth:`__call__` would choose, chosen now, so a step pays no checks per product.
        ``relu``: ``F.relu`` of it, which oneDNN applies as it writes the product (relu
        only clamps, so the numbers are the same; one operation a call fewer)."""
        if not self.applies(x, layer.weight):
            linear = partial(F.linear, weight=layer.weight, bias=layer.bias)
            return partial(_relu_of, product=linear) if relu else linear
        entry = self._packed.get(layer)
        if entry is None:
            entry = self._packed[layer] = _pack((layer,))
        attr = "relu" if relu else "none"
        return partial(_packed_product, weight=entry.weight, bias=entry.bias, attr=attr)

    def stacked(self, layers: tuple[nn.Linear, ...], x: Tensor) -> tuple[Tensor, ...]:
        """``tuple(layer(x) for layer in layers)`` for layers that read the same input (a
        self-attention's query, key and value projections), as one product by their weights
        stacked and packed once."""
        return self.bind_stacked(layers, x)(x)

    def bind_stacked(self, layers: tuple[nn.Linear, ...], x: Tensor) -> Projections:
        """``lambda t: self.stacked(layers, t)`` for inputs like ``x``, chosen now (as
        :meth:`bind`)."""
        if not self.applies(x, layers[0].weight):
            return partial(_each, layers=layers)
        entry = self._packed.get(layers)
        if entry is None:
            entry = self._packed[layers] = _pack(layers)
        product = partial(_packed_product, weight=entry.weight, bias=entry.bias)
        return partial(_split, product=product, sizes=entry.sizes)


_LINEAR = torch.ops.mkldnn._linear_pointwise.default if _AVAILABLE else None


def _packed_product(x: Tensor, weight: Tensor, bias: Tensor | None, attr: str = "none") -> Tensor:
    """``x @ W.T + b`` by oneDNN, ``weight`` packed by :func:`_pack`; ``attr`` ``"relu"``:
    its relu."""
    assert _LINEAR is not None
    return _LINEAR(x, weight, bias, attr, [], "")


def _relu_of(x: Tensor, product: Projection) -> Tensor:
    return F.relu(product(x))


def _split(x: Tensor, product: Projection, sizes: list[int]) -> tuple[Tensor, ...]:
    """``product(x)`` split into the stacked layers' outputs."""
    return torch.split_with_sizes(product(x), sizes, dim=-1)  # no Tensor.split wrapper


def _each(x: Tensor, layers: tuple[nn.Linear, ...]) -> tuple[Tensor, ...]:
    """Each layer's ``F.linear`` of ``x``."""
    return tuple(F.linear(x, layer.weight, layer.bias) for layer in layers)


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
