"""``model.linear_layers = "onednn"``: training steps' linear layers by oneDNN's linear —
the same values and gradients as ``F.linear`` to float32 rounding, the same parameters and
state dict, ``F.linear`` itself outside training; the operator they call
(``selfattn::onednn_linear``) registered as ``torch.library`` checks it, with
``F.linear``'s gradients in float64."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from selfattn.attention.packed_linear import OneDNNLinear, onednn_linear, onednn_usable
from selfattn.models.linear_layers import use_linear_layers
from selfattn.models.registry import model_options
from selfattn.models.task_model import TaskSpec, build_model_from_spec

needs_onednn = pytest.mark.skipif(
    not onednn_usable(torch.zeros(1), torch.zeros(1)), reason="this PyTorch has no oneDNN"
)


def _onednn(fan_in: int, fan_out: int, bias: bool) -> tuple[nn.Linear, OneDNNLinear]:
    plain = nn.Linear(fan_in, fan_out, bias=bias)
    fast = nn.Linear(fan_in, fan_out, bias=bias)
    fast.load_state_dict(plain.state_dict())
    use_linear_layers(fast, "onednn")
    assert isinstance(fast, OneDNNLinear)
    return plain, fast


@needs_onednn
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("input_grad", [True, False])
def test_values_and_gradients_are_the_linear_layers(bias: bool, input_grad: bool) -> None:
    """Forward and every gradient against the float64 product (a wrong transpose or a
    missing bias gradient would be off by far more than float32 rounding)."""
    plain, fast = _onednn(48, 80, bias)
    x = torch.randn(6, 7, 48, requires_grad=input_grad)
    grad = torch.randn(6, 7, 80)
    out = fast(x)
    out.backward(grad)
    reference = plain.double()
    x64 = x.detach().double().requires_grad_(input_grad)
    expected = reference(x64)
    expected.backward(grad.double())
    close = {"atol": 1e-5, "rtol": 1e-5}
    torch.testing.assert_close(out.double(), expected, **close)
    assert fast.weight.grad is not None and reference.weight.grad is not None
    torch.testing.assert_close(fast.weight.grad.double(), reference.weight.grad, **close)
    if bias:
        assert fast.bias.grad is not None and reference.bias.grad is not None
        torch.testing.assert_close(fast.bias.grad.double(), reference.bias.grad, **close)
    if input_grad:
        assert x.grad is not None and x64.grad is not None
        torch.testing.assert_close(x.grad.double(), x64.grad, **close)
    assert out.grad_fn is not None and "onednn_linear" in type(out.grad_fn).__name__


@needs_onednn
def test_outside_training_it_is_f_linear_bit_for_bit() -> None:
    plain, fast = _onednn(48, 80, True)
    x = torch.randn(5, 48)
    fast.eval()
    assert torch.equal(fast(x), plain(x))  # evaluation
    fast.train()
    with torch.no_grad():
        assert torch.equal(fast(x), plain(x))  # no gradients
    assert torch.equal(fast.double()(x.double()), plain.double()(x.double()))  # float64


@pytest.mark.parametrize("bias", [True, False])
def test_the_operator_has_f_linear_gradients_in_float64(bias: bool) -> None:
    """In float64 (where it multiplies by ``F.linear``) the operator's backward gives
    ``F.linear``'s gradients: input, weight and bias, and numerically (gradcheck)."""
    generator = torch.Generator().manual_seed(0)
    x, weight = (
        torch.randn(*shape, dtype=torch.float64, generator=generator)
        for shape in ((2, 3, 5), (4, 5))
    )
    inputs = [x.requires_grad_(), weight.requires_grad_()]
    if bias:
        inputs.append(torch.randn(4, dtype=torch.float64, generator=generator).requires_grad_())
    grad = torch.randn(2, 3, 4, dtype=torch.float64, generator=generator)
    ours = torch.autograd.grad(onednn_linear(*inputs, *([] if bias else [None])), inputs, grad)
    theirs = torch.autograd.grad(F.linear(*inputs), inputs, grad)
    for mine, reference in zip(ours, theirs, strict=True):
        torch.testing.assert_close(mine, reference, rtol=1e-12, atol=1e-12)
    assert torch.autograd.gradcheck(
        lambda *a: onednn_linear(a[0], a[1], a[2] if bias else None), inputs
    )


@needs_onednn
def test_the_operator_passes_torch_library_checks() -> None:
    """``torch.library.opcheck`` on oneDNN's float32 path: schema, autograd registration,
    fake tensor (the shapes ``torch.compile`` traces with) and AOT dispatch with dynamic
    shapes, with a bias and without."""
    generator = torch.Generator().manual_seed(0)
    x, weight, bias = (
        torch.randn(*shape, generator=generator, requires_grad=True)
        for shape in ((3, 4, 6), (5, 6), (5,))
    )
    for args in ((x, weight, bias), (x, weight, None)):
        torch.library.opcheck(onednn_linear, args)


def test_the_model_keeps_its_parameters_and_state_dict() -> None:
    """Every nn.Linear of a default (``"auto"``) or ``"onednn"`` build trains by oneDNN;
    parameters (the tied output weight included), their names and values are those of
    the ``"torch"`` build."""
    spec = TaskSpec("token", vocab_size=50, char_vocab_size=None, num_labels=50, max_len=16)
    config = {"embed_dim": 32, "num_heads": 4, "num_layers": 2, "ffn_dim": 64}
    torch.manual_seed(0)
    default = build_model_from_spec(model_options(**config, linear_layers="torch"), spec)
    for kind in ("onednn", "auto"):
        torch.manual_seed(0)
        fast = build_model_from_spec(model_options(**config, linear_layers=kind), spec)
        linears = [m for m in fast.modules() if isinstance(m, nn.Linear)]
        assert linears and all(isinstance(m, OneDNNLinear) for m in linears)
        assert not any(isinstance(m, OneDNNLinear) for m in default.modules())
        mine, theirs = fast.state_dict(), default.state_dict()
        assert mine.keys() == theirs.keys()
        assert all(torch.equal(mine[name], theirs[name]) for name in mine)
    assert model_options().linear_layers == "auto"


def test_an_unknown_kind_is_refused_in_one_line() -> None:
    with pytest.raises(ValueError, match=r"^model.linear_layers: unknown kind 'mkl'; choose"):
        model_options(linear_layers="mkl")  # type: ignore[arg-type]
