"""``model.linear_layers``: which matrix product a built model's linear layers train with
(:class:`~selfattn.attention.packed_linear.OneDNNLinear`)."""

from __future__ import annotations

from typing import Literal

from torch import nn

from selfattn.attention.packed_linear import OneDNNLinear

#: PyTorch's ``F.linear`` (MKL on an x86 CPU), or oneDNN's linear for training on the CPU;
#: ``"auto"`` (the default) is ``"onednn"``, which is ``F.linear`` where oneDNN cannot run.
LinearLayers = Literal["auto", "torch", "onednn"]
LINEAR_LAYERS: tuple[LinearLayers, ...] = ("auto", "torch", "onednn")


def use_linear_layers(model: nn.Module, kind: LinearLayers) -> nn.Module:
    """``model`` with every linear layer training by ``kind`` (in place: each layer keeps
    its parameters, tied ones included, and its state-dict keys; ``"torch"`` turns
    :class:`OneDNNLinear` layers back into ``nn.Linear`` and leaves the rest).

    Returns:
        ``model``.
    """
    for module in model.modules():
        if kind in ("auto", "onednn") and type(module) is nn.Linear:
            module.__class__ = OneDNNLinear
        elif kind == "torch" and type(module) is OneDNNLinear:
            module.__class__ = nn.Linear  # type: ignore[assignment]
    return model
