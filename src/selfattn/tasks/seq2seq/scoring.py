"""Scoring decoded seq2seq output: BLEU and chrF (sacrebleu), the token (digit) error
rate, BPE pairs, the convex hull's two measures."""

from __future__ import annotations

from dataclasses import dataclass, field

import sacrebleu
from tokenizers import Tokenizer

from selfattn.data import Example
from selfattn.data.recipes.hull import hull_metrics


def text_scores(
    hypotheses: list[str], references: list[list[str]], *, tokenize: str = "13a"
) -> dict[str, float]:
    """``bleu``, ``chrf`` and ``token_error_rate`` of detokenised ``hypotheses`` against
    the reference tokens; ``tokenize`` is sacrebleu's BLEU tokenisation (``zh`` for a
    Chinese target: one token per character, whether or not the text has spaces)."""
    gold = [[" ".join(r) for r in references]]
    # Both sides are the recipe's space-tokenised text ("Das ist gut ."), scored alike by
    # sacrebleu's 13a tokeniser; force=True says that is deliberate.
    bleu = sacrebleu.corpus_bleu(hypotheses, gold, force=True, tokenize=tokenize)
    return {
        "bleu": float(bleu.score),
        "chrf": float(sacrebleu.corpus_chrf(hypotheses, gold).score),
        "token_error_rate": token_error_rate([h.split() for h in hypotheses], references),
    }


def token_error_rate(hypotheses: list[list[str]], references: list[list[str]]) -> float:
    """Word error rate over tokens (the digit error rate of spoken digit strings): the
    substitutions, insertions and deletions of a Levenshtein alignment, summed over the
    examples, ÷ the reference tokens."""
    errors = total = 0
    for hypothesis, reference in zip(hypotheses, references, strict=True):
        row = list(range(len(hypothesis) + 1))  # distances from the empty reference prefix
        for i, gold in enumerate(reference, start=1):
            previous, row[0] = row[0], i
            for j, token in enumerate(hypothesis, start=1):
                substitute = previous + (gold != token)
                previous = row[j]
                row[j] = min(row[j] + 1, row[j - 1] + 1, substitute)
        errors += row[-1]
        total += len(reference)
    return errors / max(total, 1)


def bpe_pair(example: Example, bpe: Tokenizer) -> Example:
    """Source and target split into subwords; the original target kept for scoring."""
    source = example.tokens or ()
    pieces = tuple(bpe.encode(list(source), is_pretokenized=True).tokens) if source else ()
    target = tuple(bpe.encode(list(example.label), is_pretokenized=True).tokens)
    return Example(pieces, example.features, target, example.source)


@dataclass
class Decoded:
    """Decoded outputs of a list of examples, in order."""

    tokens: list[list[str]]
    seconds: float
    scores: list[float] = field(default_factory=list)


def hull_scores(examples: list[Example], decoded: Decoded) -> dict[str, float]:
    """The convex hull's two measures. A set encoder cannot know which point has the
    smallest index, so the hull's canonical starting vertex is arbitrary to it:
    ``hull_exact`` accepts any rotation of the right counter-clockwise cycle;
    ``exact_match`` demands the canonical one."""
    scores = [
        hull_metrics(example.features, [int(t) for t in hypothesis if t.isdigit()])
        for example, hypothesis in zip(examples, decoded.tokens, strict=True)
        if example.features is not None
    ]
    return {
        "hull_exact": sum(exact for exact, _ in scores) / len(scores),
        "hull_coverage": sum(coverage for _, coverage in scores) / len(scores),
    }
