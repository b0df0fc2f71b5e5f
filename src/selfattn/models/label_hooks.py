"""What a label task (token, sequence, regression, multi-label) asks of its model besides
``forward(batch)``: each hook has a plain model's behaviour here, and an architecture that
adds to the loss or needs more of the task overrides it. The task types call the hooks
and never ask which class a model is.

* :meth:`LabelModelHooks.task_loss`: the loss of a batch from the task's per-logits loss;
  a plain model adds its adaptive depth's ponder cost (0 without), the early-exit model
  weighs every exit's loss instead.
* :meth:`LabelModelHooks.start_step` / :meth:`LabelModelHooks.bind`: the memory network's
  linear start, and the words it names its memories with.
* :attr:`LabelModelHooks.attention_view`: what its attention maps show: ``"blocks"``
  (every block's self-attention over the input's positions), ``"wordpieces"`` (the same
  over a pretrained tokenizer's pieces) or ``"hops"`` (a question's attention over its
  story's facts).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar, Literal

from torch import Tensor, nn

from selfattn.models.act import ponder_penalty

AttentionView = Literal["blocks", "wordpieces", "hops"]


class LabelModelHooks(nn.Module):
    """The hooks of a label task's model, with a plain model's behaviour."""

    attention_view: ClassVar[AttentionView] = "blocks"
    #: A classifier after every block that ``selfattn eval --exit-threshold`` can stop at.
    has_exit_heads: ClassVar[bool] = False

    def task_loss(
        self, forward: Callable[..., Any], batch: Any, loss_of: Callable[[Tensor], Tensor]
    ) -> Tensor:
        """The loss of ``batch``: ``loss_of`` the logits, plus what the model adds.

        Args:
            forward: the model as the loop calls it (under DistributedDataParallel, the
                wrapper, so that its gradient hooks see the forward pass).
            batch: the collated batch.
            loss_of: the task's loss of one set of logits.
        """
        return loss_of(forward(batch)) + ponder_penalty(self)

    def start_step(self, step: int) -> None:
        """Called with the optimizer step before each training batch (nothing here)."""

    def bind(self, words: Any, labels: list[str]) -> None:
        """Called with the task's vocabulary and labels once it is built (nothing here)."""
