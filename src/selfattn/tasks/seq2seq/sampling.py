"""Scheduled sampling: feed the decoder some of its own predictions while training
(lecture 001 §5.5, lecture 003 §Scheduled Sampling; Bengio et al. 2015).

Under teacher forcing the decoder only ever reads gold previous tokens, while at test time
it reads its own, mistakes included — the *exposure bias*: one wrong token and the rest
goes wrong too. Scheduled sampling replaces each gold input token, with a probability that
rises over training, by the model's prediction for that position.

An RNN makes its prediction for step t before reading step t's input, so Bengio et al.
sample on the fly. A Transformer decodes every position of a teacher-forced target in one
pass, so Mihaylova & Martins (2019) run the decoder twice: a first pass under teacher
forcing, with no gradient, yields a prediction at every position; the inputs of a second
pass mix those predictions with the gold tokens, and only the second pass is trained,
against the gold ``target_out``. :func:`scheduled_sampling_inputs` builds those mixed
inputs; :class:`SamplingSchedule` says how often to mix.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import torch
from torch import Tensor

from selfattn.data.batching.seq2seq_collate import Seq2SeqBatch
from selfattn.models.seq2seq import EncodedSource
from selfattn.models.seq2seq_builder import Seq2SeqModel

ScheduleKind = Literal["constant", "linear", "exponential", "inverse_sigmoid"]
SCHEDULES: tuple[ScheduleKind, ...] = ("constant", "linear", "exponential", "inverse_sigmoid")
# The exponential schedule never arrives; ``steps`` is where it has covered this much of
# the way to ``max_ratio``.
_EXPONENTIAL_REACH = 0.99


@dataclass(frozen=True)
class SamplingSchedule:
    """The probability of feeding the model's own token instead of the gold one, by step.

    Bengio et al. (2015) decay the probability ε_i of *teacher forcing* at step i; here the
    complement, scaled to ``max_ratio``: ``ratio(i) = max_ratio · (1 − ε_i)``, which rises
    from (about) 0 to ``max_ratio``. Their three decays, each with its one parameter set
    from ``steps`` so that every kind rises over the same span:

    * ``"linear"``: ε_i = max(0, 1 − i / steps) — reaches ``max_ratio`` at ``steps``;
    * ``"exponential"``: ε_i = kⁱ with k = 0.01^(1/steps) — 99 % of the way at ``steps``;
    * ``"inverse_sigmoid"``: ε_i = k / (k + exp(i / k)) with k ln k = steps / 2, so the
      midpoint (half of ``max_ratio``) falls at ``steps / 2``; it starts at
      ``max_ratio / (1 + k)`` rather than 0 (the paper's form) and reaches
      ``max_ratio · k / (1 + k)`` at ``steps``;
    * ``"constant"``: ``max_ratio`` from the first step (``steps`` unused).

    Attributes:
        kind: the decay, one of :data:`SCHEDULES`.
        max_ratio: the highest probability of the model's token, in [0, 1]. Keep it well
            below 1: the gold ``target_out`` stays the target, so a model that reads
            mostly its own tokens learns to jump back onto the gold sequence.
        steps: optimizer steps over which the ratio rises, ≥ 1.
    """

    kind: ScheduleKind
    max_ratio: float = 0.25
    steps: int = 2000

    def __post_init__(self) -> None:
        if self.kind not in SCHEDULES:
            raise ValueError(
                f"unknown sampling schedule {self.kind!r}; choose one of {', '.join(SCHEDULES)}"
            )
        if not 0.0 <= self.max_ratio <= 1.0:
            raise ValueError(f"max_ratio must lie in [0, 1], got {self.max_ratio}")
        if self.steps < 1:
            raise ValueError(f"steps must be at least 1, got {self.steps}")

    def ratio(self, step: int) -> float:
        """Probability of replacing a gold input token at optimizer step ``step`` (≥ 0)."""
        if step < 0:
            raise ValueError(f"step must be ≥ 0, got {step}")
        if self.kind == "constant":
            rise = 1.0
        elif self.kind == "linear":
            rise = min(1.0, step / self.steps)
        elif self.kind == "exponential":
            rise = 1.0 - (1.0 - _EXPONENTIAL_REACH) ** (step / self.steps)
        else:
            k = _inverse_sigmoid_k(self.steps)
            # 1 − k / (k + e^{i/k}) = sigmoid(i/k − ln k), written so exp cannot overflow.
            rise = _sigmoid(step / k - math.log(k))
        return self.max_ratio * rise


def _inverse_sigmoid_k(steps: int) -> float:
    """The k ≥ 1 with k ln k = steps / 2 (Newton's method on x eˣ = steps / 2, x = ln k)."""
    target = steps / 2
    x = math.log1p(target)  # above the root, where Newton's steps descend monotonically
    for _ in range(100):
        update = (x * math.exp(x) - target) / (math.exp(x) * (x + 1.0))
        x -= update
        if abs(update) < 1e-12:
            break
    return math.exp(x)


def _sigmoid(x: float) -> float:
    if x >= 0:
        return 1.0 / (1.0 + math.exp(-x))
    z = math.exp(x)
    return z / (1.0 + z)


def scheduled_sampling_inputs(
    model: Seq2SeqModel,
    encoded: EncodedSource,
    batch: Seq2SeqBatch,
    ratio: float,
    *,
    generator: torch.Generator | None = None,
    sample: bool = False,
) -> Tensor:
    """Decoder inputs with gold tokens replaced by the model's predictions (two-pass form).

    A first decoder pass over ``batch.target_in`` under teacher forcing, without gradient,
    predicts a token at every position; position t − 1's prediction is the model's guess at
    input token t. Each input after BOS is then replaced by that guess with probability
    ``ratio``, independently; BOS and padding are kept. Predictions are fed exactly as
    decoding would feed them — EOS included, and in copy mode an extended id, which the
    model reads back as ``<unk>``.

    The first pass runs in the model's current mode: in training mode its dropout makes the
    predictions noisier; pass an ``eval()`` model for the argmax of the clean model.

    Args:
        model: the model being trained.
        encoded: ``model.encode`` of ``batch`` (reused by the trained second pass).
        batch: the teacher-forced batch; ``target_in`` ``(B, T)``.
        ratio: probability in [0, 1] of replacing each gold input token.
        generator: random source for the replacement draws and the samples; it must live on
            ``batch.target_in``'s device.
        sample: replace with a token sampled from the predicted distribution rather than
            its argmax.

    Returns:
        ``(B, T)`` long, the second pass's ``target_in``; ``batch.target_in`` itself when
        ``ratio`` is 0 (no first pass is run).
    """
    if not 0.0 <= ratio <= 1.0:
        raise ValueError(f"ratio must lie in [0, 1], got {ratio}")
    target_in = batch.target_in
    if ratio == 0.0 or target_in.shape[1] < 2:
        return target_in
    with torch.no_grad():
        out = model.decode(
            target_in,
            encoded,
            target_padding=batch.target_padding,
            num_extended=batch.num_extended,
        )
        predicted = _predict(out.log_probs, sample=sample, generator=generator)  # (B, T)
    draws = torch.rand(
        target_in[:, 1:].shape, generator=generator, device=target_in.device
    )  # (B, T − 1)
    replace = (draws < ratio) & ~batch.target_padding[:, 1:]
    mixed = target_in.clone()
    mixed[:, 1:] = torch.where(replace, predicted[:, :-1], target_in[:, 1:])
    return mixed


def _predict(log_probs: Tensor, *, sample: bool, generator: torch.Generator | None) -> Tensor:
    """``(B, T, V)`` log-probabilities → ``(B, T)`` argmax or sampled ids."""
    if not sample:
        return log_probs.argmax(dim=-1)
    batch, steps, vocab = log_probs.shape
    probs = log_probs.float().exp().reshape(batch * steps, vocab)  # exp(−inf) = 0: never drawn
    return torch.multinomial(probs, 1, generator=generator).reshape(batch, steps)
