"""End-to-end memory network (Sukhbaatar, Szlam, Weston & Fergus 2015; lecture 003,
"Memory Network"): attention over a memory of sentences, hop after hop.

Each sentence x_i of the story is embedded twice: as a key m_i (what the question is
matched against, matrix A) and as a value c_i (what is read out, matrix C) — the lecture's
"blue" and "orange" vectors, which need not be the same. The question q is embedded as
u¹ (matrix B). One hop:

    p_i = softmax_i(u^k · m_i^k)        (attention over the memories)
    o^k = Σ_i p_i c_i^k                  (the extracted information)
    u^{k+1} = o^k + u^k                  (or H u^k + o^k, layer-wise tying)

and the answer is softmax(W (o^K + u^K)). A sentence is embedded as the position-weighted
sum of its word vectors (position encoding, PE: l_kj = (1 − j/J) − (k/d)(1 − 2j/J)), plus
a learned vector per memory age (temporal encoding: the most recent sentence is age 0).

Training tricks of §4.2: linear start (:attr:`MemN2N.linear`: no softmax in the hops
until the dev loss stops falling) and random noise (:func:`add_empty_memories`: 10 % empty
memories slipped into each story, so the temporal encoding does not overfit).

Weight tying (§2.2): ``"adjacent"`` — the value matrix of hop k is the key matrix of hop
k + 1, the answer matrix is the last value matrix transposed, and B = A¹; ``"layerwise"`` —
every hop shares A and C, and u is mapped by a linear H between hops.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch
from torch import Tensor, nn

Tying = Literal["adjacent", "layerwise"]


def position_encoding(words: int, dim: int) -> Tensor:
    """``(J, d)`` weights l_kj = (1 − j/J) − (k/d)(1 − 2j/J), j and k counted from 1."""
    j = torch.arange(1, words + 1, dtype=torch.float32).unsqueeze(1)  # (J, 1)
    k = torch.arange(1, dim + 1, dtype=torch.float32).unsqueeze(0)  # (1, d)
    return (1 - j / words) - (k / dim) * (1 - 2 * j / words)


@dataclass
class MemoryOutput:
    """A memory network's answer.

    Attributes:
        logits: ``(B, V)`` answer scores.
        attentions: per hop, ``(B, N)`` attention over the memories (0 at padding).
    """

    logits: Tensor
    attentions: list[Tensor]


class MemN2N(nn.Module):
    """An end-to-end memory network over sentences of word ids.

    Args:
        vocab_size: V, word ids 0 … V − 1; id 0 is padding (embedded as zeros).
        embed_dim: d.
        hops: K, attention passes over the memory.
        max_memories: N, the most sentences read (temporal encoding has one vector per age).
        tying: ``"adjacent"`` or ``"layerwise"`` (see the module docstring).
        position_encoding: weight words by position (PE); False: bag of words.
        temporal: add a learned vector per memory age.
    """

    def __init__(
        self,
        vocab_size: int,
        embed_dim: int,
        *,
        hops: int = 3,
        max_memories: int = 50,
        tying: Tying = "adjacent",
        position_encoding: bool = True,
        temporal: bool = True,
    ) -> None:
        super().__init__()
        if hops < 1:
            raise ValueError(f"hops must be at least 1, got {hops}")
        if tying not in ("adjacent", "layerwise"):
            raise ValueError(f"tying must be 'adjacent' or 'layerwise', got {tying!r}")
        self.hops, self.tying, self.max_memories = hops, tying, max_memories
        #: Linear start (§4.2): the hops' softmax left out, p = the raw scores, until
        #: training sets it back to False (when the dev loss stops falling).
        self.linear = False
        self.embed_dim, self.use_position, self.temporal = embed_dim, position_encoding, temporal
        count = hops + 1 if tying == "adjacent" else 2  # A¹, C¹ = A², …, C^K  |  A, C
        self.embeddings = nn.ModuleList(
            nn.Embedding(vocab_size, embed_dim, padding_idx=0) for _ in range(count)
        )
        self.times = nn.ParameterList(
            nn.Parameter(torch.zeros(max_memories, embed_dim)) for _ in range(count)
        )
        if tying == "layerwise":
            self.question = nn.Embedding(vocab_size, embed_dim, padding_idx=0)
            self.hop_map: nn.Linear | None = nn.Linear(embed_dim, embed_dim, bias=False)
            self.answer: nn.Linear | None = nn.Linear(embed_dim, vocab_size, bias=False)
        else:
            self.hop_map = self.answer = None
        for index in range(count):
            weight = self._embedding(index).weight
            nn.init.normal_(weight, std=0.1)
            weight.data[0].zero_()
        for time in self.times:
            nn.init.normal_(time, std=0.1)

    def _embedding(self, index: int) -> nn.Embedding:
        embedding = self.embeddings[index]
        assert isinstance(embedding, nn.Embedding)
        return embedding

    def _key_value(self, hop: int) -> tuple[int, int]:
        """Indices of hop ``hop``'s key and value embeddings."""
        return (hop, hop + 1) if self.tying == "adjacent" else (0, 1)

    def _sentences(self, ids: Tensor, embedding: nn.Embedding) -> Tensor:
        """``(…, J)`` word ids → ``(…, d)`` sentence vectors."""
        words = embedding(ids)  # (…, J, d)
        if self.use_position:
            words = words * position_encoding(ids.shape[-1], self.embed_dim).to(words)
        return words.sum(-2)

    def forward(self, memories: Tensor, question: Tensor) -> MemoryOutput:
        """Answer ``question`` from ``memories``.

        Args:
            memories: ``(B, N, J)`` word ids of the sentences, oldest first, padded with 0
                (a sentence of all 0 is an empty memory slot); N ≤ ``max_memories``.
            question: ``(B, Jq)`` word ids, padded with 0.

        Raises:
            ValueError: more memories than ``max_memories``; mismatched batch sizes.
        """
        batch, slots, _ = memories.shape
        if slots > self.max_memories:
            raise ValueError(f"{slots} memories; this network reads at most {self.max_memories}")
        if question.shape[0] != batch:
            raise ValueError(f"question batch {question.shape[0]} != memory batch {batch}")
        empty = (memories == 0).all(-1)  # (B, N)
        # Age of each slot: slots before the newest real sentence (age 0), empty ones
        # included, so an empty memory (random noise) makes the older sentences older.
        index = torch.arange(slots, device=memories.device)
        newest = torch.where(empty, 0, index).amax(1, keepdim=True)  # (B, 1)
        age = (newest - index).clamp(min=0)  # (B, N); past the newest: masked anyway
        if self.tying == "adjacent":
            u = self._sentences(question, self._embedding(0))  # B = A¹
        else:
            u = self._sentences(question, self.question)
        attentions = []
        for hop in range(self.hops):
            key_index, value_index = self._key_value(hop)
            keys = self._sentences(memories, self._embedding(key_index))
            values = self._sentences(memories, self._embedding(value_index))
            if self.temporal:
                keys = keys + self.times[key_index][age]
                values = values + self.times[value_index][age]
            scores = torch.einsum("bnd,bd->bn", keys, u).masked_fill(empty, float("-inf"))
            if self.linear:
                p = scores.masked_fill(empty, 0.0)
            else:
                p = scores.softmax(-1).nan_to_num(0.0)  # a story with no memory reads nothing
            attentions.append(p)
            o = torch.einsum("bn,bnd->bd", p, values)
            u = o + (u if self.hop_map is None else self.hop_map(u))
        # Adjacent tying: the answer matrix is the last value matrix, Wᵀ = C^K.
        last = self._embedding(len(self.embeddings) - 1).weight
        logits = u @ last.T if self.answer is None else self.answer(u)
        return MemoryOutput(logits, attentions)


def add_empty_memories(memories: Tensor, fraction: float, generator: torch.Generator) -> Tensor:
    """``(B, N, J)`` stories with about ``fraction`` of their sentences preceded by an empty
    memory (random noise, §4.2), kept to N slots (the oldest sentences drop out).

    An empty slot is all padding: it is never read, but it shifts the temporal encoding
    of the older sentences.
    """
    batch, slots, words = memories.shape
    out = torch.zeros_like(memories)
    for row in range(batch):
        real = memories[row][(memories[row] != 0).any(-1)]  # (n, J), oldest first
        noisy = []
        for sentence in real:
            if float(torch.rand((), generator=generator)) < fraction:
                noisy.append(torch.zeros(words, dtype=memories.dtype))
            noisy.append(sentence)
        kept = noisy[-slots:]
        if kept:
            out[row, : len(kept)] = torch.stack(kept)
    return out
