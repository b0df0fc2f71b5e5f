"""The end-to-end memory network as a task model (``model.architecture = "memn2n"``).

A sequence task on text whose examples are stories — facts ending in ``.``, then a
question (the ``qa1`` … ``qa3`` recipes: ``mary went to the kitchen . where is mary ?``) —
is read the way Sukhbaatar et al. (2015) read bAbI: every fact becomes one memory (its
words, without the ``.``), the words after the last ``.`` (without the ``?``) are the
question, and :class:`~selfattn.memory.memn2n.MemN2N` answers over ``num_layers`` hops of
attention. The answer is scored against the words the labels are: the network's output
matrix is tied to its word embeddings, so a label must be a word of the vocabulary.

The split happens inside the model, on the batch's word ids, so the task's data, batches,
vocabularies and checkpoints are those of any text classifier. The ids of ``.``, ``?``
and the label words are buffers set when the task binds its vocabulary
(:meth:`MemoryTaskModel.bind`) and stored with the weights.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import torch
from torch import Tensor

from selfattn.datatypes import Batch
from selfattn.memory.memn2n import MemN2N, add_empty_memories
from selfattn.models.architectures.memn2n import MemN2NOptions
from selfattn.models.label_hooks import LabelModelHooks
from selfattn.specials import STORY_END as END
from selfattn.specials import STORY_QUESTION as QUESTION

__all__ = ["MemoryTaskModel", "Stories", "Words", "split_stories"]


class Words(Protocol):
    """What :meth:`MemoryTaskModel.bind` reads of a word vocabulary (a
    :class:`~selfattn.data.vocab.Vocabulary`)."""

    def __contains__(self, token: object) -> bool: ...

    def token_id(self, token: str) -> int: ...


@dataclass
class Stories:
    """A batch of stories cut into memories and questions.

    Attributes:
        memories: ``(B, N, J)`` word ids of each story's last ≤ N facts, oldest first,
            padded with 0 (an all-0 row is an empty slot).
        question: ``(B, Jq)`` word ids of each question, padded with 0.
        facts: ``(B,)`` how many facts each story has in all (the kept ones are its last
            ``min(facts, N)``).
    """

    memories: Tensor
    question: Tensor
    facts: Tensor


def split_stories(ids: Tensor, end_id: int, ask_id: int, memory_size: int) -> Stories:
    """Cut ``(B, L)`` word ids (0 = padding) into facts at ``end_id`` and the question
    after the last one; ``end_id`` and ``ask_id`` themselves are left out, and a story
    keeps its ``memory_size`` most recent facts."""
    batch, length = ids.shape
    is_end = ids == end_id
    ends_before = is_end.long().cumsum(1) - is_end.long()  # a fact's "." is in that fact
    facts = is_end.sum(1)  # (B,)
    position = torch.arange(length, device=ids.device).expand(batch, length)
    starts = torch.zeros_like(is_end)
    starts[:, 0] = True
    starts[:, 1:] = is_end[:, :-1]
    start = torch.where(starts, position, torch.zeros_like(position)).cummax(1).values
    word = position - start  # the position of each token in its sentence
    keep = (ids != 0) & ~is_end & (ids != ask_id)
    kept_facts = facts.clamp(max=memory_size)
    slot = ends_before - (facts - kept_facts)[:, None]  # older facts go below 0
    in_fact = keep & (ends_before < facts[:, None]) & (slot >= 0)
    in_question = keep & (ends_before == facts[:, None])
    slots = max(int(kept_facts.max()) if batch else 0, 1)
    words = int(word[in_fact].max()) + 1 if bool(in_fact.any()) else 1
    question_words = int(word[in_question].max()) + 1 if bool(in_question.any()) else 1
    rows = torch.arange(batch, device=ids.device)[:, None].expand(batch, length)
    memories = ids.new_zeros(batch, slots, words)
    memories[rows[in_fact], slot[in_fact], word[in_fact]] = ids[in_fact]
    question = ids.new_zeros(batch, question_words)
    question[rows[in_question], word[in_question]] = ids[in_question]
    return Stories(memories, question, facts)


class MemoryTaskModel(LabelModelHooks):
    """A sequence-task model: word ids of stories in, ``(B, num_labels)`` logits out.

    Args:
        config: the model section: ``embed_dim`` (d), ``num_layers`` (hops),
            ``memory_size``, ``memory_tying``, ``linear_start_steps``, ``memory_noise``.
        vocab_size: V.
        num_labels: C.
        spec: how it was built (kept for checkpoints).
    """

    attention_view = "hops"
    end_id: Tensor
    ask_id: Tensor
    label_words: Tensor
    linear: Tensor

    def __init__(
        self, config: MemN2NOptions, *, vocab_size: int, num_labels: int, spec: object = None
    ) -> None:
        super().__init__()
        self.network = MemN2N(
            vocab_size,
            config.embed_dim,
            hops=config.num_layers,
            max_memories=config.memory_size,
            tying=config.memory_tying,
        )
        self.memory_size = config.memory_size
        self.linear_start_steps = config.linear_start_steps
        self.memory_noise = config.memory_noise
        self.spec = spec
        # Set by bind() when a task prepares the model, read back from a checkpoint.
        self.register_buffer("end_id", torch.tensor(-1))
        self.register_buffer("ask_id", torch.tensor(-1))
        self.register_buffer("label_words", torch.full((num_labels,), -1))
        # Linear start (§4.2): stored, so a model saved while linear is read back so.
        self.register_buffer("linear", torch.tensor(config.linear_start_steps > 0))

    def bind(self, words: Words, labels: list[str]) -> None:
        """Take the ids of ``.``, ``?`` and every label word from the vocabulary.

        Raises:
            ValueError: a label is not a word of the vocabulary, or there is no ``.``.
        """
        if END not in words:
            raise ValueError(
                f'model.architecture = "memn2n" reads stories of facts ending in {END!r}; '
                "no training example has one"
            )
        missing = [label for label in labels if label not in words]
        if missing:
            raise ValueError(
                f'model.architecture = "memn2n" answers with a word of the stories; label '
                f"{missing[0]!r} is not one of the training vocabulary's words"
            )
        self.end_id.fill_(words.token_id(END))
        self.ask_id.fill_(words.token_id(QUESTION) if QUESTION in words else -1)
        self.label_words.copy_(torch.tensor([words.token_id(label) for label in labels]))

    def start_step(self, step: int) -> None:
        """Training has reached optimizer step ``step``: linear until
        ``linear_start_steps``, then with the softmax."""
        self.linear.fill_(step < self.linear_start_steps)

    def stories(self, batch: Batch) -> Stories:
        """The batch's stories cut into memories and questions."""
        if batch.token_ids is None:
            raise ValueError('model.architecture = "memn2n" reads words, not vectors')
        if int(self.end_id) < 0:
            raise ValueError("this memory network was never bound to a vocabulary")
        return split_stories(batch.token_ids, int(self.end_id), int(self.ask_id), self.memory_size)

    def _answer(self, batch: Batch) -> tuple[Tensor, list[Tensor], Stories]:
        stories = self.stories(batch)
        memories = stories.memories
        if self.training and self.memory_noise > 0:
            memories = add_empty_memories(memories, self.memory_noise, torch.default_generator)
        self.network.linear = bool(self.linear)
        out = self.network(memories, stories.question)
        return out.logits[:, self.label_words], out.attentions, stories

    def forward(self, batch: Batch) -> Tensor:
        """``(B, num_labels)`` answer logits."""
        return self._answer(batch)[0]

    @torch.no_grad()
    def hop_attention(self, batch: Batch) -> tuple[list[Tensor], Stories]:
        """Per hop, ``(B, N)`` attention over the memories (0 at empty slots), and the
        stories they read."""
        _, attentions, stories = self._answer(batch)
        return attentions, stories
