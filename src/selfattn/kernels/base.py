"""The interface every attention variant shares, and the registry that names them.

Lecture 000 (§Truncated self-attention, §More): the attention matrix is L × L, so
speech-length inputs need something cheaper — attend to a window only, along a graph's
edges only, or approximate softmax attention with a kernel that never forms the matrix
("Efficient Transformers: A Survey", Tay et al. 2020; "Long Range Arena", Tay et al. 2021).

An :class:`AttentionKernel` takes projected, multi-head queries, keys and values and
returns the attended values, exactly as :func:`selfattn.attention.attention` does for the
dense case::

    out = kernel(q, k, v, key_padding_mask=pad, causal=False)   # (B, H, T, Dv)

:class:`~selfattn.attention.MultiHeadAttention` takes one (``kernel="window"`` plus its
options, or a module) and then does its projections around it; the model config names one
with ``model.attention``. :data:`KERNELS` maps names to classes; :func:`build_kernel`
builds one by name with a one-line error for an unknown name or option.
"""

from __future__ import annotations

import abc
import inspect
from collections.abc import Callable
from typing import Any, ClassVar, TypeVar

import torch
from torch import Tensor, nn

from selfattn.attention.functional import attention

__all__ = [
    "KERNELS",
    "AttentionKernel",
    "DenseKernel",
    "build_kernel",
    "check_kernel_inputs",
    "register_kernel",
]


class AttentionKernel(nn.Module, abc.ABC):
    """Base class of attention variants: ``(q, k, v) -> out`` over ``(B, H, L, D)`` tensors.

    Class attributes say what a variant is, so callers (the benchmark, the model builder,
    the tests) can treat them alike:

    * ``name`` — its registry key;
    * ``exact`` — it computes softmax attention exactly, restricted to its pattern (a
      window, a graph's edges; the dense kernel with no restriction), as opposed to an
      approximation of full softmax attention;
    * ``supports_causal`` — ``causal=True`` is implemented (others refuse it loudly);
    * ``quadratic`` — it forms a ``(T, S)`` matrix (only the dense reference does);
    * ``size_option`` — the constructor option a config's ``model.attention_size`` sets
      (the window half-width, the number of random features, …), if any.

    Subclasses implement :meth:`attend`; :meth:`forward` checks the inputs first.
    """

    name: ClassVar[str] = ""
    exact: ClassVar[bool] = False
    supports_causal: ClassVar[bool] = False
    quadratic: ClassVar[bool] = False
    size_option: ClassVar[str | None] = None

    def forward(
        self,
        q: Tensor,
        k: Tensor,
        v: Tensor,
        *,
        key_padding_mask: Tensor | None = None,
        causal: bool = False,
    ) -> Tensor:
        """Attend: ``q (B, H, T, D)``, ``k (B, H, S, D)``, ``v (B, H, S, Dv)`` →
        ``(B, H, T, Dv)``. ``key_padding_mask (B, S)`` is True at padding."""
        check_kernel_inputs(q, k, v, key_padding_mask)
        if causal and not self.supports_causal:
            raise ValueError(f"attention kernel {self.name!r} does not support causal=True")
        return self.attend(q, k, v, key_padding_mask=key_padding_mask, causal=causal)

    @abc.abstractmethod
    def attend(
        self,
        q: Tensor,
        k: Tensor,
        v: Tensor,
        *,
        key_padding_mask: Tensor | None,
        causal: bool,
    ) -> Tensor:
        """The variant's computation, on inputs :meth:`forward` has checked."""

    def reference(
        self,
        q: Tensor,
        k: Tensor,
        v: Tensor,
        *,
        key_padding_mask: Tensor | None = None,
        causal: bool = False,
    ) -> Tensor:
        """What this kernel computes (exact kernels) or approximates, by dense softmax
        attention: the yardstick of its error in tests and in ``selfattn bench``.
        Kernels that change the attention itself (LSH's shared query-key) override it."""
        mask = self.reference_mask(q.shape[-2], k.shape[-2], q.device)
        out, _ = attention(q, k, v, mask=mask, key_padding_mask=key_padding_mask, causal=causal)
        return out

    def reference_mask(
        self, num_queries: int, num_keys: int, device: torch.device
    ) -> Tensor | None:
        """The boolean ``(T, S)`` mask (True = may attend) under which dense softmax
        attention equals this kernel, for exact kernels; ``None`` = no restriction."""
        return None


_K = TypeVar("_K", bound=type[AttentionKernel])

#: Attention variants by name (``model.attention`` in a config, ``kernel=`` in
#: :class:`~selfattn.attention.MultiHeadAttention`).
KERNELS: dict[str, type[AttentionKernel]] = {}


def register_kernel(cls: _K) -> _K:
    """Class decorator: add a kernel to :data:`KERNELS` under its ``name``."""
    if not cls.name:
        raise ValueError(f"{cls.__name__} needs a non-empty class attribute 'name'")
    if cls.name in KERNELS and KERNELS[cls.name] is not cls:
        raise ValueError(f"attention kernel {cls.name!r} is already registered")
    KERNELS[cls.name] = cls
    return cls


def build_kernel(name: str, **options: Any) -> AttentionKernel:
    """The kernel called ``name``, built with ``options`` (e.g. ``window=256``).

    Options the kernel's constructor does not take are an error, except the common sizes
    ``head_dim`` and ``max_len`` which every builder may pass and kernels ignore unless
    they need them.
    """
    if name not in KERNELS:
        raise ValueError(f"unknown attention kernel {name!r}; choose one of {sorted(KERNELS)}")
    cls = KERNELS[name]
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


def check_kernel_inputs(q: Tensor, k: Tensor, v: Tensor, key_padding_mask: Tensor | None) -> None:
    """One-line errors for malformed kernel inputs (shapes, dtypes, the padding mask)."""
    for label, t in (("q", q), ("k", k), ("v", v)):
        if t.dim() != 4:
            raise ValueError(f"{label} must have shape (B, H, L, D), got {tuple(t.shape)}")
        if not t.is_floating_point():
            raise TypeError(f"{label} must be a floating-point tensor, got {t.dtype}")
    if not q.dtype == k.dtype == v.dtype:
        raise TypeError(f"q, k, v must share a dtype, got {q.dtype}, {k.dtype}, {v.dtype}")
    if q.shape[:2] != k.shape[:2] or k.shape[:3] != v.shape[:3]:
        raise ValueError(
            f"q, k, v must agree in batch and heads (k, v also in length): "
            f"q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)}"
        )
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(f"q and k head dims differ: q {tuple(q.shape)}, k {tuple(k.shape)}")
    if key_padding_mask is not None:
        if key_padding_mask.dtype != torch.bool:
            raise TypeError(
                f"key_padding_mask must be bool (True = padding), got {key_padding_mask.dtype}"
            )
        expected = (k.shape[0], k.shape[2])
        if tuple(key_padding_mask.shape) != expected:
            raise ValueError(
                f"key_padding_mask must have shape (B, S) = {expected}, "
                f"got {tuple(key_padding_mask.shape)}"
            )


@register_kernel
class DenseKernel(AttentionKernel):
    """Full softmax attention through :func:`selfattn.attention.attention` (PyTorch's
    fused ``scaled_dot_product_attention``): the reference the other variants are
    measured against."""

    name = "dense"
    exact = True
    supports_causal = True
    quadratic = True

    def __init__(self, dropout: float = 0.0) -> None:
        super().__init__()
        self.dropout = dropout

    def attend(
        self,
        q: Tensor,
        k: Tensor,
        v: Tensor,
        *,
        key_padding_mask: Tensor | None,
        causal: bool,
    ) -> Tensor:
        out, _ = attention(
            q,
            k,
            v,
            key_padding_mask=key_padding_mask,
            causal=causal,
            dropout=self.dropout if self.training else 0.0,
        )
        return out
