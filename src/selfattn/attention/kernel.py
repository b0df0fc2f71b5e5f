"""The one interface every attention kernel shares (lecture 000, §Self-attention, matrix
form; §Truncated self-attention, §More).

Attention is ``O = f(score(Q, K)) · V``. The dense kernel computes it as written (the
matrix is T × S); speech-length inputs need something cheaper — attend to a window only, or
approximate softmax attention without forming the matrix ("Efficient Transformers: A
Survey", Tay et al. 2020; "Long Range Arena", Tay et al. 2021).

Every kernel, dense included, is called the same way, with the arguments of
:func:`selfattn.attention.attention` that concern *what* is attended::

    out, weights = kernel(q, k, v, key_padding_mask=pad, causal=True, need_weights=True)

and declares what it can do as class attributes (``supports_causal``, ``supports_mask``,
``supports_window``, ``supports_weights``, ``supports_scores``, ``supports_cache``,
``supports_cross``, ``supports_gqa``). A call that asks for more is refused in one line
that names the kernel, the capability and why, e.g. ``attention kernel 'linformer' cannot
return attention weights: it attends over 64 projected keys, not over positions``.
How a kernel computes (its dropout, window, features, …) is fixed when it is built.

The interface lives here, beside the formula, so that
:class:`~selfattn.attention.MultiHeadAttention` can hold any kernel (the dense one,
:class:`~selfattn.attention.dense.DenseKernel`, unless given another) without importing
:mod:`selfattn.kernels`: the kernels build on the attention layer, never the reverse. Their
registry, :data:`selfattn.kernels.KERNELS`, names them for the model config.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

import torch
from torch import Tensor, nn

from selfattn.attention.checks import check_key_padding_mask, check_qkv
from selfattn.attention.functional import attention
from selfattn.attention.normalizers import NormalizerFn, softmax
from selfattn.attention.scores import AdditiveScore, ScoreFn, scaled_dot_score

__all__ = [
    "CAPABILITIES",
    "AttentionKernel",
    "AttentionRequest",
    "Capability",
    "check_kernel_inputs",
    "default_scores",
]

Capability = Literal["causal", "mask", "window", "weights", "scores", "cache", "cross", "gqa"]

#: What a kernel without the capability cannot do, as its refusal says it.
CAPABILITIES: dict[Capability, str] = {
    "causal": "attend causally",
    "mask": "take a mask (nor a relative positional score bias)",
    "window": "take a window at call time",
    "weights": "return attention weights",
    "scores": "use another score, normaliser or include_self=False",
    "cache": "decode from a KV cache",
    "cross": "attend from T queries to S != T keys",
    "gqa": "share key/value heads between query heads (num_kv_heads < num_heads)",
}

_EVERY_CAPABILITY = frozenset(CAPABILITIES)

#: Why a kernel lacks a capability, unless it says more precisely (``reasons``).
_DEFAULT_REASONS: dict[Capability, str] = {
    "causal": "it has no causal form",
    "mask": "it forms no (T, S) scores to mask; use the dense kernel (rotary and absolute "
    "positions work with any kernel)",
    "window": "use the 'window' kernel or the dense kernel for truncated attention",
    "weights": "it forms no attention matrix",
    "scores": "it computes its own similarity; the lecture's scores and normalisers need "
    "the dense kernel",
    "cache": "it cannot attend from the newest queries to every cached key; decode with dense",
    "cross": "it is self-attention within one sequence",
    "gqa": "give it num_kv_heads = num_heads, or use the dense kernel",
}


@dataclass(frozen=True, slots=True)
class AttentionRequest:
    """What one call asks of a kernel besides q, k, v (the arguments of
    :meth:`AttentionKernel.forward`, which documents them)."""

    key_padding_mask: Tensor | None = None
    mask: Tensor | None = None
    causal: bool = False
    window: int | None = None
    need_weights: bool = False
    score: str | ScoreFn | AdditiveScore = "scaled_dot"
    normalizer: str | NormalizerFn = "softmax"
    include_self: bool = True

    def capabilities(self, q: Tensor, k: Tensor) -> list[Capability]:
        """The capabilities this request needs for queries ``q`` and keys ``k``."""
        needed: list[Capability] = []
        if self.causal:
            needed.append("causal")
        if self.mask is not None:
            needed.append("mask")
        if self.window is not None:
            needed.append("window")
        if self.need_weights:
            needed.append("weights")
        if not default_scores(self.score, self.normalizer, self.include_self):
            needed.append("scores")
        if q.shape[2] != k.shape[2]:
            needed.append("cross")
        if q.shape[1] != k.shape[1]:
            needed.append("gqa")
        return needed


def default_scores(
    score: str | ScoreFn | nn.Module, normalizer: str | NormalizerFn, include_self: bool
) -> bool:
    """Whether these are softmax attention's defaults: scaled dot product, softmax, self."""
    scaled_dot = (isinstance(score, str) and score == "scaled_dot") or score is scaled_dot_score
    plain = (isinstance(normalizer, str) and normalizer == "softmax") or normalizer is softmax
    return scaled_dot and plain and include_self


class AttentionKernel(nn.Module, abc.ABC):
    """Base class of attention kernels: ``(q, k, v) -> (out, weights or None)`` over
    ``(B, H, L, D)`` tensors.

    Class attributes say what a kernel is, so callers (MultiHeadAttention, the benchmark,
    the model builder, the tests) treat them alike:

    * ``name`` — its registry key;
    * ``exact`` — it computes softmax attention exactly, restricted to its pattern (a
      window; the dense kernel with no restriction), as opposed to an approximation;
    * ``quadratic`` — it forms a ``(T, S)`` matrix (only the dense reference does);
    * ``size_option`` — the constructor option a config's ``model.attention_size`` sets
      (the window half-width, the number of random features, …), if any;
    * ``supports_<capability>`` — what a call may ask for (see :data:`CAPABILITIES`):
      ``causal``; a ``mask`` (boolean, or additive such as a relative positional bias); a
      ``window`` at call time; ``weights`` (the ``(B, H, T, S)`` matrix that multiplies V:
      exact for exact kernels, the implied one for approximations); lecture ``scores``
      (another score or normaliser, ``include_self=False``); a KV ``cache`` (the queries
      are the last T of S keys); ``cross`` (T ≠ S); ``gqa`` (fewer key/value heads);
    * ``reasons`` — why it lacks a capability, where it can say more than the default
      (formatted with ``kernel=self``).

    Subclasses implement :meth:`attend`; :meth:`forward` checks the inputs and refuses
    what the kernel does not support first.
    """

    name: ClassVar[str] = ""
    exact: ClassVar[bool] = False
    quadratic: ClassVar[bool] = False
    size_option: ClassVar[str | None] = None
    supports_causal: ClassVar[bool] = False
    supports_mask: ClassVar[bool] = False
    supports_window: ClassVar[bool] = False
    supports_weights: ClassVar[bool] = False
    supports_scores: ClassVar[bool] = False
    supports_cache: ClassVar[bool] = False
    supports_cross: ClassVar[bool] = True
    supports_gqa: ClassVar[bool] = False
    reasons: ClassVar[dict[Capability, str]] = {}
    #: The ``supports_*`` flags as a set, collected once per class (calls check it).
    supported: ClassVar[frozenset[Capability]] = frozenset()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.supported = frozenset(c for c in CAPABILITIES if getattr(cls, f"supports_{c}"))

    def forward(
        self,
        q: Tensor,
        k: Tensor,
        v: Tensor,
        *,
        key_padding_mask: Tensor | None = None,
        mask: Tensor | None = None,
        causal: bool = False,
        window: int | None = None,
        need_weights: bool = False,
        score: str | ScoreFn | AdditiveScore = "scaled_dot",
        normalizer: str | NormalizerFn = "softmax",
        include_self: bool = True,
    ) -> tuple[Tensor, Tensor | None]:
        """Attend from ``q`` to ``k``/``v``.

        Args:
            q: queries ``(B, H, T, D)``.
            k: keys ``(B, Hk, S, D)``; ``Hk < H`` (a divisor) needs ``supports_gqa``.
            v: values ``(B, Hk, S, Dv)``.
            key_padding_mask: ``(B, S)`` boolean, True at padding; every kernel ignores
                whatever padded keys and values hold (NaN and inf included).
            mask: boolean (True = may attend) or additive float mask broadcastable to
                ``(B, H, T, S)`` (``supports_mask``).
            causal: query i sees only keys j ≤ i, bottom-right aligned when T < S
                (``supports_causal``).
            window: truncated attention to |i − j| ≤ ``window`` (``supports_window``).
            need_weights: also return the ``(B, H, T, S)`` weights (``supports_weights``).
            score: ``"scaled_dot"`` (default), ``"dot"``, an :class:`AdditiveScore` or a
                callable (anything but the default needs ``supports_scores``).
            normalizer: ``"softmax"`` (default), ``"relu"``, ``"sigmoid"`` or a callable.
            include_self: False forbids attending to one's own position.

        Returns:
            ``(out (B, H, T, Dv), weights (B, H, T, S) or None)``; weights only when asked.
        """
        check_kernel_inputs(q, k, v, key_padding_mask)
        request = AttentionRequest(
            key_padding_mask=key_padding_mask,
            mask=mask,
            causal=causal,
            window=window,
            need_weights=need_weights,
            score=score,
            normalizer=normalizer,
            include_self=include_self,
        )
        if self.supported != _EVERY_CAPABILITY:  # the dense kernel has nothing to refuse
            for capability in request.capabilities(q, k):
                self.require(capability)
        return self.attend(q, k, v, request)

    @abc.abstractmethod
    def attend(
        self, q: Tensor, k: Tensor, v: Tensor, request: AttentionRequest
    ) -> tuple[Tensor, Tensor | None]:
        """The kernel's computation, on inputs and a request :meth:`forward` has checked:
        ``(out (B, H, T, Dv), weights (B, H, T, S) if request.need_weights else None)``."""

    @classmethod
    def supports(cls, capability: Capability) -> bool:
        """Whether calls may ask for ``capability`` (one of :data:`CAPABILITIES`)."""
        if capability not in CAPABILITIES:
            raise ValueError(
                f"unknown capability {capability!r}; choose one of {', '.join(CAPABILITIES)}"
            )
        return capability in cls.supported

    def require(self, capability: Capability) -> None:
        """Raise the one-line refusal unless this kernel supports ``capability``."""
        if capability not in self.supported:
            raise ValueError(self.refusal(capability))

    def refusal(self, capability: Capability) -> str:
        """``attention kernel 'name' cannot <capability>: <reason>`` (one line)."""
        reason = self.reasons.get(capability, _DEFAULT_REASONS[capability])
        return (
            f"attention kernel {self.name!r} cannot {CAPABILITIES[capability]}: "
            + reason.format(kernel=self)
        )

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


def check_kernel_inputs(q: Tensor, k: Tensor, v: Tensor, key_padding_mask: Tensor | None) -> None:
    """One-line errors for malformed kernel inputs (shapes, dtypes, the padding mask)."""
    check_qkv(q, k, v)
    if q.shape[0] != k.shape[0] or q.shape[1] % k.shape[1] or k.shape[:3] != v.shape[:3]:
        raise ValueError(
            f"q, k, v must agree in batch, q's heads be a multiple of k's, and k, v agree in "
            f"heads and length: q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)}"
        )
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(f"q and k head dims differ: q {tuple(q.shape)}, k {tuple(k.shape)}")
    check_key_padding_mask(key_padding_mask, k.shape[0], k.shape[2])
