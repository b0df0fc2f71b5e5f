"""Whether a checkpoint's weights and optimizer state fit a model, said before loading.

``load_state_dict`` of a model or an optimizer of another shape fails with a page of
``size mismatch`` lines, or, for an optimizer, not at all until the first step adds
moments of one shape to gradients of another. Every reader of a checkpoint (``eval``,
``predict``, ``--resume``, ``train.init_from``) asks these first and refuses in one line
naming the first tensor that differs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from torch import Tensor, nn, optim


def weights_misfit(model: nn.Module, weights: Mapping[str, Tensor]) -> str | None:
    """Why ``weights`` cannot be loaded into ``model`` (missing or unexpected tensor
    names, or the first tensor of another shape), or ``None`` when every name and shape
    matches."""
    expected = model.state_dict()
    missing = [name for name in expected if name not in weights]
    unexpected = [name for name in weights if name not in expected]
    if missing or unexpected:
        parts = []
        if missing:
            parts.append(f"missing {_some(missing)}")
        if unexpected:
            parts.append(f"unexpected {_some(unexpected)}")
        return "; ".join(parts)
    for name, tensor in expected.items():
        stored = weights[name]
        if stored.shape != tensor.shape:
            return f"{name} is {_shape(stored)} in the checkpoint, {_shape(tensor)} in the model"
    return None


def load_fitting_weights(model: nn.Module, weights: Mapping[str, Tensor], refusal: str) -> None:
    """Load ``weights`` into ``model`` once :func:`weights_misfit` finds nothing wrong.

    Raises:
        ValueError: ``refusal`` followed by the misfit in parentheses, before loading.
    """
    misfit = weights_misfit(model, weights)
    if misfit is not None:
        raise ValueError(f"{refusal} ({misfit})")
    model.load_state_dict(weights)


def optimizer_misfit(
    model: nn.Module, optimizer: optim.Optimizer, state: Mapping[str, Any]
) -> str | None:
    """Why the optimizer ``state`` (a ``state_dict``) cannot drive ``optimizer`` of
    ``model``: other parameter counts, or a per-parameter tensor (Adam's moments) of
    another shape than its parameter; ``None`` when it fits."""
    names = {id(param): name for name, param in model.named_parameters()}
    groups = optimizer.param_groups
    stored_groups = state.get("param_groups", [])
    counts = [len(group["params"]) for group in groups]
    stored_counts = [len(group["params"]) for group in stored_groups]
    if counts != stored_counts:
        return (
            f"the optimizer state is of parameter groups of {stored_counts} parameters, "
            f"the model's of {counts}"
        )
    moments = state.get("state", {})
    for group, stored in zip(groups, stored_groups, strict=True):
        for param, index in zip(group["params"], stored["params"], strict=True):
            for key, value in moments.get(index, moments.get(str(index), {})).items():
                if isinstance(value, Tensor) and value.dim() and value.shape != param.shape:
                    name = names.get(id(param), f"parameter {index}")
                    return (
                        f"the optimizer state's {key} of {name} is {_shape(value)}, the "
                        f"parameter {_shape(param)}"
                    )
    return None


def _shape(tensor: Tensor) -> str:
    return str(list(tensor.shape))


def _some(names: list[str]) -> str:
    shown = ", ".join(names[:3])
    return shown + (f" and {len(names) - 3} more" if len(names) > 3 else "")
