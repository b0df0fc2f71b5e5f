"""The end-to-end memory network: its closed form with one memory, attention that is a
distribution over the real memories, a set function of them without temporal encoding."""

from __future__ import annotations

import pytest
import torch

from selfattn.memory import MemN2N, position_encoding

V, D = 20, 8


def _story(seed: int = 0, batch: int = 3, slots: int = 5, words: int = 4) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    memories = torch.randint(1, V, (batch, slots, words), generator=generator)
    memories[0, 3:] = 0  # the first story has 3 sentences
    memories[:, :, -1] = 0  # padded words
    return memories


def test_one_memory_is_the_closed_form() -> None:
    """One memory: p = 1, o = Σ C[s], answer Cᵀ-scores of o + u with u = Σ A[q]."""
    torch.manual_seed(0)
    net = MemN2N(V, D, hops=1, max_memories=1, position_encoding=False, temporal=False)
    sentence, question = torch.tensor([[[3, 5, 7]]]), torch.tensor([[2, 9]])
    out = net(sentence, question)
    a, c = net.embeddings[0].weight, net.embeddings[1].weight
    u, o = a[[2, 9]].sum(0), c[[3, 5, 7]].sum(0)
    torch.testing.assert_close(out.logits[0], (o + u) @ c.T)
    assert out.attentions[0].tolist() == [[1.0]]


@pytest.mark.parametrize("tying", ["adjacent", "layerwise"])
def test_attention_is_a_distribution_over_the_real_memories(tying: str) -> None:
    net = MemN2N(V, D, hops=3, max_memories=5, tying=tying)  # type: ignore[arg-type]
    out = net(_story(), torch.randint(1, V, (3, 3)))
    assert out.logits.shape == (3, V) and len(out.attentions) == 3
    for p in out.attentions:
        torch.testing.assert_close(p.sum(-1), torch.ones(3))
        assert (p[0, 3:] == 0).all()  # empty slots are never read


def test_without_temporal_encoding_the_memory_is_a_set() -> None:
    """Permuting the sentences permutes the attention and leaves the answer alone."""
    net = MemN2N(V, D, hops=2, max_memories=5, temporal=False)
    memories, question = _story(1), torch.randint(1, V, (3, 3))
    perm = torch.tensor([4, 2, 0, 3, 1])
    out, shuffled = net(memories, question), net(memories[:, perm], question)
    torch.testing.assert_close(shuffled.logits, out.logits)
    for p, q in zip(out.attentions, shuffled.attentions, strict=True):
        torch.testing.assert_close(q, p[:, perm])


def test_temporal_encoding_tells_the_newest_sentence() -> None:
    """With temporal encoding the same sentences in another order answer differently; the
    newest real sentence has age 0 even when empty slots follow it."""
    net = MemN2N(V, D, hops=1, max_memories=5, position_encoding=False)
    with torch.no_grad():
        for embedding in net.embeddings:
            embedding.weight.zero_()
        net.times[0].zero_()
        net.times[0][0, 0] = 5.0  # the key of age 0 points along the question
        net.embeddings[0].weight[1, 0] = 1.0  # question word 1
    memories = torch.tensor([[[2], [3], [4], [0], [0]]])
    p = net(memories, torch.tensor([[1]])).attentions[0]
    assert int(p.argmax()) == 2  # the third sentence is the newest


def test_position_encoding_matches_the_paper() -> None:
    weights = position_encoding(4, 2)
    j, k = 2, 1  # 1-based
    assert float(weights[j - 1, k - 1]) == pytest.approx((1 - j / 4) - (k / 2) * (1 - 2 * j / 4))


def test_refusals() -> None:
    with pytest.raises(ValueError, match="hops must be at least 1"):
        MemN2N(V, D, hops=0)
    with pytest.raises(ValueError, match="6 memories; this network reads at most 5"):
        MemN2N(V, D, max_memories=5)(torch.ones(1, 6, 2, dtype=torch.long), torch.ones(1, 2).long())
