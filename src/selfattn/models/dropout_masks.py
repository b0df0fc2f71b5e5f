"""``model.dropout_masks``: how a built model's dropout draws its masks
(:mod:`selfattn.attention.dropout`)."""

from __future__ import annotations

from torch import nn

from selfattn.attention.dropout import DropoutMasks, UniformDropout
from selfattn.kernels.dense import DenseKernel


def use_dropout_masks(model: nn.Module, masks: DropoutMasks) -> nn.Module:
    """``model`` with every ``nn.Dropout`` layer and every dense attention kernel drawing
    ``masks`` (in place; ``"bernoulli"``, what they are built with, changes nothing). Other
    attention kernels and ``nn.GRU``'s inter-layer dropout keep PyTorch's masks.

    Returns:
        ``model``.
    """
    if masks == "bernoulli":
        return model
    for module in list(model.modules()):
        if isinstance(module, DenseKernel):
            module.dropout_masks = masks
        for name, child in module.named_children():
            if type(child) is nn.Dropout:
                setattr(module, name, UniformDropout(child.p, child.inplace, masks))
    return model
