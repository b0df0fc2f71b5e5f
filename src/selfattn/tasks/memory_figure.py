"""The attention figure of a memory network (``architecture = "memn2n"``, lecture 003): per
hop, a story's question attending to its facts."""

from __future__ import annotations

from collections.abc import Sequence

from selfattn.data import Batch, Example
from selfattn.models.memory import MemoryTaskModel
from selfattn.specials import STORY_END
from selfattn.tasks.task import AttentionFigure


def memory_figure(model: MemoryTaskModel, batch: Batch, example: Example) -> AttentionFigure:
    """A memory network's attention of one story: per hop a ``(1, 1, N)`` map from its
    question to its facts (the ones it keeps), each labelled by its words."""
    hops, stories = model.hop_attention(batch)
    facts = _sentences(example.tokens or ())
    question = facts.pop() if facts and not _is_fact(facts[-1]) else ""
    kept = facts[len(facts) - stories.memories.shape[1] :] if facts else []
    keys = [" ".join(words) for words in kept]
    maps = [weights[:1, : len(keys)].unsqueeze(0) for weights in hops]
    return AttentionFigure(
        "memory attention", maps, [" ".join(question) or "?"], keys or ["(no facts)"], "hop"
    )


def _sentences(tokens: Sequence[str]) -> list[list[str]]:
    """``tokens`` cut after every ``.``: the facts (with their ``.``), then what follows."""
    out: list[list[str]] = [[]]
    for token in tokens:
        out[-1].append(token)
        if token == STORY_END:
            out.append([])
    return [sentence for sentence in out if sentence]


def _is_fact(sentence: list[str]) -> bool:
    return bool(sentence) and sentence[-1] == STORY_END
