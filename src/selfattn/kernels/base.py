"""The registry that names the attention kernels: :data:`KERNELS`, :func:`register_kernel`
and :func:`build_kernel` (``model.attention`` in a config).

The interface every kernel shares, :class:`~selfattn.attention.kernel.AttentionKernel`,
lives in the attention layer (:mod:`selfattn.attention.kernel`), so that
:class:`~selfattn.attention.MultiHeadAttention` holds a kernel without importing this
package; its names are re-exported here, where the kernels and their callers import
them. :data:`KERNELS` maps names to classes; :func:`build_kernel` builds one by name
with a one-line error for an unknown name or option.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any, TypeVar, get_args

from selfattn.attention.kernel import (
    CAPABILITIES,
    AttentionKernel,
    AttentionRequest,
    Capability,
    check_kernel_inputs,
    default_scores,
)
from selfattn.registries import Registry

__all__ = [
    "CAPABILITIES",
    "KERNELS",
    "AttentionKernel",
    "AttentionRequest",
    "Capability",
    "build_kernel",
    "check_kernel_inputs",
    "default_scores",
    "register_kernel",
]

_K = TypeVar("_K", bound=type[AttentionKernel])

#: Attention kernels by name (``model.attention`` in a config, ``kernel=`` in
#: :class:`~selfattn.attention.MultiHeadAttention`).
KERNELS: Registry[type[AttentionKernel]] = Registry("attention kernel")


def register_kernel(cls: _K) -> _K:
    """Class decorator: add a kernel to :data:`KERNELS` under its ``name``."""
    unknown = set(getattr(cls, "reasons", {})) - set(get_args(Capability))
    if unknown:
        raise ValueError(f"attention kernel {cls.name!r} gives reasons for unknown {unknown}")
    return KERNELS.add_class(cls)


def build_kernel(name: str, **options: Any) -> AttentionKernel:
    """The kernel called ``name``, built with ``options`` (e.g. ``window=256``).

    Options the kernel's constructor does not take are an error, except the common sizes
    ``head_dim`` and ``max_len`` which every builder may pass and kernels ignore unless
    they need them.
    """
    cls = KERNELS.named(name)
    accepted = _parameters(cls.__init__)
    unknown = sorted(set(options) - accepted - {"head_dim", "max_len"})
    if unknown:
        raise ValueError(
            f"attention kernel {name!r} takes no option {', '.join(map(repr, unknown))}; "
            f"its options are {sorted(accepted) or 'none'}"
        )
    missing = sorted(_required(cls.__init__) - set(options))
    if missing:
        raise ValueError(
            f"attention kernel {name!r} needs option(s) {', '.join(map(repr, missing))}"
            + (" (model.attention_size in a config)" if cls.size_option in missing else "")
        )
    return cls(**{key: value for key, value in options.items() if key in accepted})


def _required(function: Callable[..., Any]) -> set[str]:
    parameters = inspect.signature(function).parameters.values()
    return {
        p.name
        for p in parameters
        if p.default is inspect.Parameter.empty
        and p.name != "self"
        and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
    }


def _parameters(function: Callable[..., Any]) -> set[str]:
    skip = {"self", "args", "kwargs"}
    return {name for name in inspect.signature(function).parameters if name not in skip}
