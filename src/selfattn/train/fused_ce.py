"""A vocabulary projection fused with its cross-entropy, chunked over rows.

The plain output layer of a decoder computes the logits ``z = h Wᵀ + b`` of every target
position at once, ``(N, V)``, then their log-softmax, another ``(N, V)``; autograd keeps
both for the backward pass. At V = 32,000 and N = 4,096 positions that is 1 GiB of
float32 per step.
:func:`linear_cross_entropy` gives the same loss and the same gradients without ever
holding more than ``chunk_rows × V`` logits: it walks the real (non-ignored) rows in
chunks, and for each chunk computes the logits, their log-sum-exp, the chunk's loss and
— right away, while the chunk's logits are at hand — the chunk's gradient with respect to
the logits, ``∂ℓ/∂z = softmax(z) − (1 − ε)·onehot(y) − ε/V``, which it folds into
``∂/∂h = (∂ℓ/∂z) W`` and ``∂/∂W += (∂ℓ/∂z)ᵀ h`` (and ``∂/∂b``) before the next chunk.
The backward pass only scales those by the incoming gradient. So a step does three
matrix products with the ``(V, E)`` weight, as the plain path does, instead of the four
of recomputing each chunk's logits in the backward; what it keeps between the passes is
``∂/∂h`` ``(N, E)`` and ``∂/∂W`` ``(V, E)``, the sizes of the hidden states and the
weight, not of the logits. Rows whose target is ``ignore_index`` (padding) are skipped
outright: their loss and gradient are 0 on the plain path too.

Under ``torch.no_grad()`` (evaluation) no gradient is formed; the loss alone is chunked.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from selfattn.specials import IGNORE_INDEX

#: ``train.fused_cross_entropy = "auto"`` fuses a vocabulary of at least this many ids.
AUTO_MIN_VOCAB = 8192
#: Logits held at once (float32 entries: 16 MiB): a chunk has this many ÷ V rows.
CHUNK_ELEMENTS = 2**22


def default_chunk_rows(vocab_size: int) -> int:
    """Rows per chunk for a ``vocab_size``-way output: :data:`CHUNK_ELEMENTS` logits,
    at least 16 rows (so the matrix products stay efficient at any V)."""
    return max(16, CHUNK_ELEMENTS // max(vocab_size, 1))


def fuses(setting: str, output: str, vocab_size: int) -> bool:
    """Whether ``train.fused_cross_entropy = setting`` fuses a seq2seq model's output layer
    of kind ``output`` over ``vocab_size`` ids.

    Only the ``"vocab"`` output is a cross-entropy of one projection's logits. The pointer
    output's "vocabulary" is the source positions (a few dozen scores, nothing to save);
    the copy output's probability of an id is a mixture, p_gen · softmax(z)_y plus
    (1 − p_gen) times the attention on the source tokens that are y, whose log is not the
    logit minus a log-sum-exp; ``on`` is refused for both when the config is loaded.
    """
    if output != "vocab" or setting == "off":
        return False
    return setting == "on" or vocab_size >= AUTO_MIN_VOCAB


def check_fusable(task: str, output: str) -> None:
    """Refuse ``train.fused_cross_entropy = "on"`` for a ``task`` task (``output``: its
    ``seq2seq.output``) that has no vocabulary projection to fuse (:func:`fuses`)."""
    if task != "seq2seq":
        where = f"this dataset is a {task} task"
    elif output != "vocab":
        where = f'the loss of seq2seq.output = "{output}" is not a cross-entropy of its logits'
    else:
        return
    raise ValueError(
        'train.fused_cross_entropy = "on" fuses a seq2seq decoder\'s vocabulary projection '
        f'with its loss; {where} (set it "auto" or "off")'
    )


def linear_cross_entropy(
    hidden: Tensor,
    weight: Tensor,
    bias: Tensor | None,
    target: Tensor,
    *,
    ignore_index: int = IGNORE_INDEX,
    label_smoothing: float = 0.0,
    chunk_rows: int | None = None,
) -> Tensor:
    """Mean label-smoothed cross-entropy of ``hidden @ weight.T + bias`` against ``target``.

    The same number, and the same gradients with respect to ``hidden``, ``weight`` and
    ``bias``, as ``F.cross_entropy(F.linear(hidden, weight, bias), target,
    ignore_index=ignore_index, label_smoothing=ε)`` — except that a batch with no real
    row gives 0 (still differentiable) rather than NaN, as
    :func:`~selfattn.tasks.seq2seq.losses.sequence_nll` does. Logits are formed in at
    least float32 (a float64 model's stay float64).

    Args:
        hidden: ``(..., E)`` the projection's inputs.
        weight: ``(V, E)`` the projection (a tied embedding table is fine).
        bias: ``(V,)`` or ``None``.
        target: ``(...)`` gold ids, ``ignore_index`` where nothing is scored.
        ignore_index: the target id of rows that are not scored.
        label_smoothing: ε in [0, 1): (1 − ε) on the gold id, ε spread evenly over V.
        chunk_rows: rows per chunk (default :func:`default_chunk_rows`).

    Returns:
        A scalar tensor.
    """
    if hidden.shape[:-1] != target.shape:
        raise ValueError(
            f"hidden (..., E) and target (...) disagree: {tuple(hidden.shape)} and "
            f"{tuple(target.shape)}"
        )
    if weight.dim() != 2 or weight.shape[1] != hidden.shape[-1]:
        raise ValueError(
            f"weight must be (V, E) with E = {hidden.shape[-1]}, got {tuple(weight.shape)}"
        )
    if bias is not None and bias.shape != weight.shape[:1]:
        raise ValueError(f"bias must be ({weight.shape[0]},), got {tuple(bias.shape)}")
    if not 0.0 <= label_smoothing < 1.0:
        raise ValueError(f"label_smoothing must lie in [0, 1), got {label_smoothing}")
    rows = chunk_rows if chunk_rows is not None else default_chunk_rows(weight.shape[0])
    if rows < 1:
        raise ValueError(f"chunk_rows must be at least 1, got {rows}")
    # Inside forward grad mode is always off: whether to form gradients is decided here.
    grads = torch.is_grad_enabled() and any(
        t is not None and t.requires_grad for t in (hidden, weight, bias)
    )
    loss: Tensor = _LinearCrossEntropy.apply(
        hidden, weight, bias, target, ignore_index, label_smoothing, rows, grads
    )
    return loss


class _LinearCrossEntropy(torch.autograd.Function):
    """:func:`linear_cross_entropy`'s forward and backward (module docstring)."""

    @staticmethod
    def forward(
        ctx: Any,
        hidden: Tensor,
        weight: Tensor,
        bias: Tensor | None,
        target: Tensor,
        ignore_index: int,
        smoothing: float,
        chunk_rows: int,
        grads: bool,
    ) -> Tensor:
        shape, dim = hidden.shape, hidden.shape[-1]
        flat = hidden.reshape(-1, dim)
        real = (target.reshape(-1) != ignore_index).nonzero().squeeze(1)
        gold = target.reshape(-1).index_select(0, real)
        count = max(int(real.numel()), 1)
        vocab = weight.shape[0]
        precision = torch.promote_types(hidden.dtype, weight.dtype)
        precision = torch.promote_types(precision, torch.float32)
        wants = [grads and bool(need) for need in ctx.needs_input_grad[:3]]
        grad_hidden = torch.zeros_like(flat) if wants[0] else None
        grad_weight = (
            torch.zeros(weight.shape, dtype=precision, device=weight.device) if wants[1] else None
        )
        grad_bias = (
            torch.zeros(vocab, dtype=precision, device=weight.device)
            if bias is not None and wants[2]
            else None
        )
        total = torch.zeros((), dtype=precision, device=hidden.device)
        for start in range(0, int(real.numel()), chunk_rows):
            index = real[start : start + chunk_rows]
            h = flat.index_select(0, index)
            y = gold[start : start + chunk_rows]
            logits = F.linear(h, weight, bias).to(precision)  # (n, V)
            lse = torch.logsumexp(logits, dim=-1)  # (n,)
            picked = logits.gather(1, y.unsqueeze(1)).squeeze(1)
            loss = lse - picked
            if smoothing > 0:
                loss = (1.0 - smoothing) * loss + smoothing * (lse - logits.mean(-1))
            total = total + loss.sum()
            if grad_hidden is None and grad_weight is None and grad_bias is None:
                continue
            # ∂(mean loss)/∂z, in place over the logits: softmax − (1 − ε)·onehot − ε/V.
            grad = logits.sub_(lse.unsqueeze(1)).exp_()
            if smoothing > 0:
                grad.sub_(smoothing / vocab)
            grad.scatter_add_(1, y.unsqueeze(1), grad.new_full((y.numel(), 1), -(1.0 - smoothing)))
            grad.div_(count)
            if grad_hidden is not None:
                grad_hidden.index_copy_(0, index, (grad.to(weight.dtype) @ weight).to(flat.dtype))
            if grad_weight is not None:
                grad_weight.addmm_(grad.t(), h.to(precision))
            if grad_bias is not None:
                grad_bias.add_(grad.sum(0))
        ctx.shape = shape
        ctx.weight_dtype = weight.dtype
        ctx.save_for_backward(grad_hidden, grad_weight, grad_bias)
        return total / count

    @staticmethod
    def backward(ctx: Any, grad_output: Tensor) -> tuple[Tensor | None, ...]:
        grad_hidden, grad_weight, grad_bias = ctx.saved_tensors
        scale = grad_output
        dh = None if grad_hidden is None else (grad_hidden * scale).reshape(ctx.shape)
        dw = None if grad_weight is None else (grad_weight * scale).to(ctx.weight_dtype)
        db = None if grad_bias is None else (grad_bias * scale).to(ctx.weight_dtype)
        return dh, dw, db, None, None, None, None, None
