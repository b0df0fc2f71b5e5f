"""Sequence-level training: optimise the evaluation metric itself (lecture 003).

Teacher-forced likelihood trains each token given the *gold* prefix, and is judged by
BLEU or an error rate on the model's *own* outputs. The two objectives here train on the
model's own outputs, scored by a cost Δ(y, y*) = 1 − sentence BLEU, or the token error
rate (edit distance ÷ reference length) for tasks scored by an error rate:

* **Minimum risk training** (Shen et al. 2016, "Minimum Risk Training for Neural Machine
  Translation", §3): per source x a candidate subset S(x) — k samples and/or beam
  search's k-best, deduplicated, optionally with the reference — and over it the
  distribution Q(y) = p(y|x)^α / Σ_{y'∈S} p(y'|x)^α. The loss is the expected risk
  R = Σ_{y∈S} Q(y) Δ(y, y*), differentiated through log p(y|x) (:func:`minimum_risk`).
* **REINFORCE with a baseline** (Williams 1992; Ranzato et al. 2016, "Sequence Level
  Training with Recurrent Neural Networks"): k samples, reward r = −Δ, baseline b the mean
  reward of the *other* samples of the same source (leave-one-out, so it does not depend
  on the sample it corrects and the gradient stays unbiased), loss
  −(1/k) Σ (r − b) log p(y|x) (:func:`reinforce_loss`).

Candidates come from :mod:`selfattn.decoding` (sampling, beam) with the model in eval mode
and no gradient; one teacher-forced pass in training mode over all candidates then gives
the log p(y|x) the loss differentiates.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import sacrebleu
import torch
from torch import Tensor

from selfattn.config import TrainConfig
from selfattn.data.batching.seq2seq_collate import Seq2SeqBatch
from selfattn.decoding import beam_search, sample
from selfattn.models.seq2seq import BOS_ID, EOS_ID, PAD_ID
from selfattn.models.seq2seq_builder import Seq2SeqModel
from selfattn.models.seq2seq_options import Seq2SeqConfig
from selfattn.specials import IGNORE_INDEX
from selfattn.tasks.seq2seq.objective import Seq2SeqObjective, encode_batch
from selfattn.tasks.seq2seq.scoring import token_error_rate

#: ``(ids, batch, row) → text``: output ids (no BOS / EOS) of example ``row`` as the
#: detokenised text the evaluation scores.
TextOf = Callable[[list[int], Seq2SeqBatch, int], str]


# ---------------------------------------------------------------------- costs


def bleu_cost(hypothesis: str, reference: str) -> float:
    """1 − sentence BLEU / 100 (sacrebleu's ``sentence_bleu``: 13a tokens, exp smoothing)."""
    return 1.0 - float(sacrebleu.sentence_bleu(hypothesis, [reference]).score) / 100.0


def token_error_cost(hypothesis: str, reference: str) -> float:
    """Edit distance between the whitespace tokens ÷ the reference's token count."""
    return token_error_rate([hypothesis.split()], [reference.split()])


COSTS: dict[str, Callable[[str, str], float]] = {
    "bleu": bleu_cost,
    "token_error": token_error_cost,
}


# ---------------------------------------------------------------------- the losses


def minimum_risk(seq_log_probs: Tensor, costs: Tensor, mask: Tensor, alpha: float) -> Tensor:
    """Shen et al.'s expected risk, averaged over sources.

    Args:
        seq_log_probs: ``(B, K)`` log p(y|x) of each candidate (any value where masked).
        costs: ``(B, K)`` Δ(y, y*).
        mask: ``(B, K)`` True at real candidates (at least one per row).
        alpha: α > 0, the sharpness of Q(y) ∝ p(y|x)^α.

    Returns:
        Scalar mean over the B sources of Σ_y Q(y) Δ(y, y*).
    """
    scores = torch.where(mask, alpha * torch.where(mask, seq_log_probs, 0.0), float("-inf"))
    q = scores.softmax(dim=-1)  # (B, K), 0 where masked
    return (q * torch.where(mask, costs, 0.0)).sum(-1).mean()


def reinforce_loss(seq_log_probs: Tensor, rewards: Tensor, mask: Tensor) -> Tensor:
    """REINFORCE with the leave-one-out baseline, averaged over samples and sources.

    b_i = (Σ_j r_j − r_i) / (n − 1) over the n real samples of the row; the loss is
    −(1/n) Σ_i (r_i − b_i) log p(y_i|x), the advantages held constant.

    Args:
        seq_log_probs: ``(B, K)`` log p(y|x) of each sample.
        rewards: ``(B, K)`` r = −Δ.
        mask: ``(B, K)`` True at real samples (at least two per row).
    """
    count = mask.sum(-1, keepdim=True).to(rewards.dtype)  # (B, 1)
    rewards = torch.where(mask, rewards, 0.0)
    baseline = (rewards.sum(-1, keepdim=True) - rewards) / (count - 1).clamp(min=1)
    advantage = torch.where(mask, rewards - baseline, 0.0).detach()
    log_probs = torch.where(mask, seq_log_probs, 0.0)
    return (-(advantage * log_probs).sum(-1) / count.squeeze(-1)).mean()


# ---------------------------------------------------------------------- candidates


@dataclass
class Candidates:
    """Every source's candidate outputs, flat.

    Attributes:
        ids: per candidate, its output ids (no BOS / EOS).
        source: ``(R,)`` long, the batch row each candidate belongs to.
        slot: ``(R,)`` long, its position among its source's candidates.
    """

    ids: list[list[int]]
    source: Tensor
    slot: Tensor

    @property
    def width(self) -> int:
        """K, the most candidates of one source."""
        return int(self.slot.max()) + 1 if self.slot.numel() else 0


def group(rows: list[list[list[int]]], *, dedupe: bool) -> Candidates:
    """Flatten per-source candidate lists (optionally without repeats, first kept)."""
    ids: list[list[int]] = []
    source: list[int] = []
    slot: list[int] = []
    for row, candidates in enumerate(rows):
        seen: set[tuple[int, ...]] = set()
        kept = 0
        for candidate in candidates:
            key = tuple(candidate)
            if dedupe and key in seen:
                continue
            seen.add(key)
            ids.append(candidate)
            source.append(row)
            slot.append(kept)
            kept += 1
    return Candidates(ids, torch.tensor(source, dtype=torch.long), torch.tensor(slot))


def teacher_forced_log_probs(
    model: Seq2SeqModel, batch: Seq2SeqBatch, candidates: Candidates
) -> Tensor:
    """``(R,)`` log p(y|x) of every candidate, EOS included, with gradients: one
    teacher-forced pass over all of them (the encoder run once per source)."""
    device = batch.target_in.device
    encoded = encode_batch(model, batch).index_select(candidates.source.to(device))
    width = max(len(ids) for ids in candidates.ids) + 1
    target_in = torch.full((len(candidates.ids), width), PAD_ID, dtype=torch.long)
    target_out = torch.full_like(target_in, IGNORE_INDEX)
    for r, ids in enumerate(candidates.ids):
        row = torch.tensor(ids, dtype=torch.long)
        target_in[r, 0] = BOS_ID
        target_in[r, 1 : len(ids) + 1] = row
        target_out[r, : len(ids)] = row
        target_out[r, len(ids)] = EOS_ID
    target_in, target_out = target_in.to(device), target_out.to(device)
    out = model.decode(
        target_in,
        encoded,
        target_padding=target_out == IGNORE_INDEX,
        num_extended=batch.num_extended,
    )
    real = target_out != IGNORE_INDEX
    picked = out.log_probs.gather(-1, target_out.clamp(min=0).unsqueeze(-1)).squeeze(-1)
    picked = picked.to(torch.promote_types(picked.dtype, torch.float32))  # bf16 sums drift
    return torch.where(real, picked, 0.0).sum(-1)


def padded(values: Tensor, candidates: Candidates, rows: int) -> tuple[Tensor, Tensor]:
    """Flat ``(R,)`` values as ``(B, K)`` with the ``(B, K)`` mask of real candidates."""
    device = values.device
    source, slot = candidates.source.to(device), candidates.slot.to(device)
    out = values.new_zeros(rows, candidates.width).index_put((source, slot), values)
    mask = torch.zeros(rows, candidates.width, dtype=torch.bool, device=device)
    mask[source, slot] = True
    return out, mask


# ---------------------------------------------------------------------- the objective


@dataclass
class SequenceLevelObjective:
    """The loss of one batch under ``train.objective = "mrt"`` or ``"reinforce"``.

    Args:
        train: the ``[train]`` section (objective, k, candidates, α, mle_weight).
        seq2seq: the ``[seq2seq]`` section (beam settings, ``max_output_ratio``).
        text_of: turns output ids into the detokenised text the cost compares.
        mle: the teacher-forced objective, added with weight ``train.mle_weight``.

    Raises:
        ValueError: an MLE-only setting (label smoothing, scheduled sampling, the
            attention terms, NAT) with ``train.mle_weight = 0``, which would ignore it.
    """

    train: TrainConfig
    seq2seq: Seq2SeqConfig
    text_of: TextOf
    mle: Seq2SeqObjective

    def __post_init__(self) -> None:
        if self.train.mle_weight == 0:
            unread = [
                name
                for name, on in (
                    ("train.label_smoothing", self.train.label_smoothing > 0),
                    ("seq2seq.scheduled_sampling", self.seq2seq.scheduled_sampling != "none"),
                    ("seq2seq.guided_attention", self.seq2seq.guided_attention > 0),
                    ("seq2seq.coverage", self.seq2seq.coverage > 0),
                    ("seq2seq.nat", self.seq2seq.nat),
                )
                if on
            ]
            if unread:
                raise ValueError(
                    f"{', '.join(unread)}: read only by the MLE loss, which "
                    f'train.objective = "{self.train.objective}" leaves out with '
                    "train.mle_weight = 0; set them off or train.mle_weight > 0"
                )

    def loss(self, model: Seq2SeqModel, batch: Seq2SeqBatch, step: int) -> Tensor:
        """Sequence-level loss of ``batch`` (plus ``mle_weight`` × the MLE loss).

        MRT's value is the risk (the expected cost under Q); REINFORCE's is the mean cost
        of its samples, with the gradient of :func:`reinforce_loss`.
        """
        train = self.train
        candidates = self.candidates(model, batch)
        seq_log_probs = teacher_forced_log_probs(model, batch, candidates)  # (R,)
        costs = self.costs(batch, candidates).to(seq_log_probs)
        rows = batch.target_in.shape[0]
        log_probs, mask = padded(seq_log_probs, candidates, rows)
        cost, _ = padded(costs, candidates, rows)
        if train.objective == "mrt":
            loss = minimum_risk(log_probs, cost, mask, train.mrt_alpha)
        else:
            surrogate = reinforce_loss(log_probs, -cost, mask)
            # Its value says nothing (it is 0 in expectation); report the samples' mean
            # cost instead, the number REINFORCE lowers, with the surrogate's gradient.
            mean_cost = (cost * mask).sum() / mask.sum()
            loss = surrogate + (mean_cost - surrogate).detach()
        if train.mle_weight > 0:
            loss = loss + train.mle_weight * self.mle.loss(model, batch, step)
        return loss

    def references(self, batch: Seq2SeqBatch) -> list[list[int]]:
        """Each example's gold output ids (no EOS)."""
        out = []
        for row in batch.target_out.tolist():
            ids = [i for i in row if i != IGNORE_INDEX]
            out.append(ids[:-1] if ids and ids[-1] == EOS_ID else ids)
        return out

    @torch.no_grad()
    def candidates(self, model: Seq2SeqModel, batch: Seq2SeqBatch) -> Candidates:
        """k samples and/or beam search's k-best per source, in eval mode; MRT drops
        repeats and may add the reference."""
        train, settings = self.train, self.seq2seq
        k, kind = train.sequence_samples, train.sequence_candidates
        was_training = model.training
        model.eval()
        try:
            encoded = encode_batch(model, batch)
            longest = int((~batch.source_padding).sum(1).max())
            max_len = min(int(settings.max_output_ratio * longest) + 10, model.max_len)
            rows = batch.target_in.shape[0]
            found: list[list[list[int]]] = [[] for _ in range(rows)]
            if kind in ("sample", "both"):
                repeated = encoded.index_select(
                    torch.arange(rows, device=encoded.memory.device).repeat_interleave(k)
                )
                drawn = sample(model, repeated, max_len=max_len, num_extended=batch.num_extended)
                for r, ids in enumerate(drawn.tokens):
                    found[r // k].append(ids)
            if kind in ("beam", "both"):
                result = beam_search(
                    model,
                    encoded,
                    beam_size=k,
                    max_len=max_len,
                    length_penalty=settings.length_penalty,
                    num_extended=batch.num_extended,
                    nbest=True,
                )
                assert result.nbest is not None
                for r, hypotheses in enumerate(result.nbest):
                    found[r].extend(h.tokens for h in hypotheses[:k])
        finally:
            model.train(was_training)
        if train.objective == "mrt" and train.mrt_reference:
            for r, gold in enumerate(self.references(batch)):
                found[r].append(gold)
        return group(found, dedupe=train.objective == "mrt")

    def cost_name(self, batch: Seq2SeqBatch) -> str:
        """``train.sequence_cost``; ``auto``: the token error rate for vector sources
        (speech: digit strings), BLEU for text."""
        cost = self.train.sequence_cost
        if cost == "auto":
            return "token_error" if batch.source.is_floating_point() else "bleu"
        return cost

    def costs(self, batch: Seq2SeqBatch, candidates: Candidates) -> Tensor:
        """``(R,)`` Δ(y, y*) of every candidate, on the detokenised text."""
        score = COSTS[self.cost_name(batch)]
        gold = [self.text_of(ids, batch, r) for r, ids in enumerate(self.references(batch))]
        values = [
            score(self.text_of(ids, batch, int(r)), gold[int(r)])
            for ids, r in zip(candidates.ids, candidates.source.tolist(), strict=True)
        ]
        return torch.tensor(values, dtype=torch.float32)


__all__ = [
    "COSTS",
    "Candidates",
    "SequenceLevelObjective",
    "bleu_cost",
    "group",
    "minimum_risk",
    "padded",
    "reinforce_loss",
    "teacher_forced_log_probs",
    "token_error_cost",
]
