"""The end-to-end memory network: its closed form with one memory, attention that is a
distribution over the real memories, a set function of them without temporal encoding."""

from __future__ import annotations

import pytest
import torch

from selfattn.memory import MemN2N, add_empty_memories, position_encoding

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


def _looking_for_age(age: int) -> MemN2N:
    """One hop whose question (word 1) matches only the key of memories of age ``age``:
    every word embeds to 0, the temporal vector of that age points along the question."""
    net = MemN2N(V, D, hops=1, max_memories=5, position_encoding=False)
    with torch.no_grad():
        for embedding in net.embeddings:
            embedding.weight.zero_()
        net.times[0].zero_()
        net.times[0][age, 0] = 5.0
        net.embeddings[0].weight[1, 0] = 1.0
    return net


def test_temporal_encoding_tells_the_newest_sentence() -> None:
    """With temporal encoding the same sentences in another order answer differently; the
    newest real sentence has age 0 even when empty slots follow it."""
    net = _looking_for_age(0)
    memories = torch.tensor([[[2], [3], [4], [0], [0]]])
    p = net(memories, torch.tensor([[1]])).attentions[0]
    assert int(p.argmax()) == 2  # the third sentence is the newest


def test_an_empty_memory_makes_the_older_sentences_older() -> None:
    """Random noise works through the temporal encoding: an empty slot between two
    sentences counts as a step of age, so the older sentence gets the next age's vector."""
    net = _looking_for_age(2)
    question = torch.tensor([[1]])
    plain = net(torch.tensor([[[2], [3], [4], [0], [0]]]), question).attentions[0].detach()
    noisy = net(torch.tensor([[[2], [0], [3], [4], [0]]]), question).attentions[0].detach()
    assert int(plain.argmax()) == 0 and float(plain[0, 0]) > 0.9  # ages 2, 1, 0
    # Ages 3, (empty), 1, 0: no sentence has age 2 any more, so none stands out.
    assert float(noisy[0, 1]) == 0.0
    torch.testing.assert_close(noisy[0, [0, 2, 3]], torch.full((3,), 1 / 3))


def test_position_encoding_matches_the_paper() -> None:
    weights = position_encoding(4, 2)
    j, k = 2, 1  # 1-based
    assert float(weights[j - 1, k - 1]) == pytest.approx((1 - j / 4) - (k / 2) * (1 - 2 * j / 4))


def test_refusals() -> None:
    with pytest.raises(ValueError, match="hops must be at least 1"):
        MemN2N(V, D, hops=0)
    with pytest.raises(ValueError, match="6 memories; this network reads at most 5"):
        MemN2N(V, D, max_memories=5)(torch.ones(1, 6, 2, dtype=torch.long), torch.ones(1, 2).long())


def test_linear_start_reads_the_raw_scores() -> None:
    net = MemN2N(V, D, hops=1, max_memories=5, temporal=False)
    memories, question = _story(2), torch.randint(1, V, (3, 3))
    net.linear = True
    p = net(memories, question).attentions[0]
    keys = net._sentences(memories, net._embedding(0))
    u = net._sentences(question, net._embedding(0))
    scores = torch.einsum("bnd,bd->bn", keys, u)
    torch.testing.assert_close(p[1:], scores[1:])
    assert (p[0, 3:] == 0).all()


def test_random_noise_adds_empty_memories_and_keeps_the_order() -> None:
    a, b, c = [1, 2], [3, 4], [5, 6]
    memories = torch.tensor([[a, b, [0, 0], [0, 0], [0, 0]], [a, b, c, a, b]])
    generator = torch.Generator().manual_seed(0)
    noisy = add_empty_memories(memories, 1.0, generator)  # an empty slot before each
    assert noisy[0].tolist() == [[0, 0], a, [0, 0], b, [0, 0]]
    assert noisy[1].tolist() == [c, [0, 0], a, [0, 0], b]  # the newest 5 slots kept
    assert torch.equal(add_empty_memories(memories, 0.0, generator), memories)
