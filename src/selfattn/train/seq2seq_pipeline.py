"""Seq2seq from a config to a trained checkpoint and back (lecture 001 §3–5).

``prepare_seq2seq`` builds the vocabularies (words, or one BPE vocabulary learned on
both sides) and the collator; :class:`Seq2SeqPredictor` reloads a checkpoint, decodes
(greedy, beam, sampling or non-autoregressive) and scores a split: BLEU and chrF with
sacrebleu for text targets, exact match for every target, and area coverage for the
convex hull.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import sacrebleu
import torch
from tokenizers import Tokenizer
from torch import nn

from selfattn.data import DatasetSplits, Example, Vocabulary, load_dataset, tokenize
from selfattn.data.collate import batches
from selfattn.data.hull import hull_metrics
from selfattn.data.lengths import cut_note, fit_examples, fit_splits, slice_example, unit
from selfattn.data.recipes import RECIPES
from selfattn.data.seq2seq_collate import (
    BOS,
    EOS,
    Seq2SeqBatch,
    Seq2SeqCollator,
    target_vocabulary,
)
from selfattn.data.splits import DEV_SEED, dev_note, stratified_subset
from selfattn.data.types import TaskType
from selfattn.data.vocab import train_bpe
from selfattn.decoding import (
    DecodeResult,
    beam_search,
    greedy,
    non_autoregressive,
    sample,
)
from selfattn.models.seq2seq import Seq2SeqTransformer
from selfattn.tasks.model import TaskSpec
from selfattn.tasks.seq2seq import encode_batch
from selfattn.train.checkpoint import load_model
from selfattn.train.config import Config
from selfattn.train.objectives import build_for_spec
from selfattn.train.run_dir import checkpoint_in

EVAL_BATCH_SIZE = 64
Method = Literal["greedy", "beam", "sample", "nat"]


@dataclass
class Seq2SeqPrepared:
    """A seq2seq dataset with its vocabularies, collator and the model's task spec;
    ``notes`` are lines for the user about what loading did."""

    splits: DatasetSplits
    source_vocab: Vocabulary | None
    target_vocab: Vocabulary | None
    collator: Seq2SeqCollator
    spec: TaskSpec
    bpe: Tokenizer | None = None
    notes: list[str] = field(default_factory=list)

    def vocabs(self) -> dict[str, Any]:
        """The vocabularies as JSON-ready dicts, for the checkpoint."""
        return {
            "task": "seq2seq",
            "input": self.splits.input,
            "source": None if self.source_vocab is None else self.source_vocab.to_dict(),
            "target": None if self.target_vocab is None else self.target_vocab.to_dict(),
            "output": self.collator.target,
            "bpe": None if self.bpe is None else self.bpe.to_str(),
        }

    def batches_of(self, examples: list[Example]) -> list[Seq2SeqBatch]:
        """``examples`` in file order, collated for evaluation."""
        groups = batches(examples, EVAL_BATCH_SIZE, shuffle=False)
        return [self.collator(group) for group in groups]


def data_task(config: Config) -> TaskType | None:
    """The task ``data.task`` asks for (``None``: read it off the recipe or the files)."""
    return None if config.data.task == "auto" else config.data.task


def too_long(example: Example, limit: tuple[int, str]) -> ValueError:
    """The one-line refusal of an input longer than a model reads."""
    size, reason = limit
    return ValueError(
        f"{example.source}: input of {len(example)} {unit(example)} is longer than this "
        f"model's max_len = {size} ({reason}); pass --truncate to keep the first {size}"
    )


def load_seq2seq_splits(config: Config, *, subset: bool = True) -> DatasetSplits:
    """The dataset of ``config``, read as seq2seq data: a dev set held out of a user's
    training file without ``data.dev``; with ``subset``, ``data.train_fraction`` of train."""
    data = config.data
    splits = load_dataset(
        data.dataset,
        dev=data.dev,
        test=data.test,
        task="seq2seq",
        dev_fraction=data.dev_fraction,
        seed=DEV_SEED,
    )
    if subset:
        splits.train = stratified_subset(splits.train, data.train_fraction, stratify=False)
    return splits


def prepare_seq2seq(config: Config, splits: DatasetSplits) -> Seq2SeqPrepared:
    """Vocabularies and collator for ``splits``.

    Text: with ``data.bpe_vocab_size`` one BPE vocabulary is learned on the training
    sources and targets together (so ``seq2seq.share_embeddings`` can share one table),
    otherwise word vocabularies with ``data.min_freq``. Vector sources need none.
    """
    data, output = config.data, config.seq2seq.output
    if not splits.train:
        raise ValueError(f"dataset {data.dataset!r} has no training examples")
    note = dev_note(
        splits, dev_file=data.dev is not None or data.dataset in RECIPES, fraction=data.dev_fraction
    )
    notes = [note] if note else []
    bpe = None
    text = splits.input == "text"
    if text and data.bpe_vocab_size is not None:
        corpus = [" ".join(e.tokens or ()) for e in splits.train]
        corpus += [" ".join(e.label) for e in splits.train]
        bpe = train_bpe(
            corpus, data.bpe_vocab_size, lowercase=data.lowercase, extra_specials=(BOS, EOS)
        )
        splits.train, splits.dev, splits.test = (
            [bpe_pair(e, bpe) for e in part] for part in (splits.train, splits.dev, splits.test)
        )
    cut = fit_splits(splits, data.max_len, data.overlong, pointer=output == "pointer")
    if cut:
        notes.append(cut_note(cut, data.max_len))
    source_vocab = target_vocab = None
    if text:
        sources = [e.tokens or () for e in splits.train]
        targets = [tuple(e.label) for e in splits.train]
        if bpe is not None:
            shared = Vocabulary(t for t, _ in sorted(bpe.get_vocab().items(), key=_by_id)[2:])
            source_vocab = target_vocab = shared
        else:
            source_vocab = Vocabulary.build(
                sources, min_freq=data.min_freq, lowercase=data.lowercase
            )
            if output != "pointer":
                target_vocab = target_vocabulary(targets, min_freq=data.min_freq)
    elif output == "copy":
        raise ValueError("seq2seq.output = 'copy' copies source words: it needs text input")
    elif output == "vocab":
        targets = [tuple(e.label) for e in splits.train]
        target_vocab = target_vocabulary(targets, min_freq=1)
    if output == "pointer" and target_vocab is not None:
        target_vocab = None
    features = splits.train[0].features
    spec = TaskSpec(
        task="seq2seq",
        num_labels=0 if target_vocab is None else len(target_vocab),
        vocab_size=None if source_vocab is None else len(source_vocab),
        feature_dim=None if features is None else int(features.shape[1]),
        max_len=data.max_len,
    )
    collator = Seq2SeqCollator(
        source_vocab,
        target_vocab,
        target=output,
        max_source_len=spec.max_len,
        max_target_len=spec.max_len,
    )
    return Seq2SeqPrepared(splits, source_vocab, target_vocab, collator, spec, bpe, notes)


def _by_id(item: tuple[str, int]) -> int:
    return item[1]


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


class Seq2SeqPredictor:
    """A trained seq2seq checkpoint: decode new sources, score a split."""

    def __init__(
        self,
        checkpoint_dir: str | Path,
        *,
        build: Callable[[Config, TaskSpec], nn.Module] = build_for_spec,
    ) -> None:
        directory = checkpoint_in(checkpoint_dir)  # a run folder: its best checkpoint
        model, checkpoint = load_model(directory, build=build)
        if not isinstance(model, Seq2SeqTransformer):
            raise ValueError(f"{directory}: not a seq2seq checkpoint")
        self.model = model
        self.config: Config = checkpoint.config
        stored = checkpoint.vocabs
        self.input = stored["input"]
        self.bpe = Tokenizer.from_str(stored["bpe"]) if stored.get("bpe") else None
        source = Vocabulary.from_dict(stored["source"]) if stored.get("source") else None
        target = Vocabulary.from_dict(stored["target"]) if stored.get("target") else None
        assert checkpoint.spec is not None
        self.max_len = checkpoint.spec.max_len
        self.collator = Seq2SeqCollator(
            source,
            target,
            target=stored["output"],
            max_source_len=self.max_len,
            max_target_len=self.max_len,
        )

    # ------------------------------------------------------------------ decoding

    def example(self, text: str, origin: str = "<input>") -> Example:
        """An unlabelled source from text (a dummy one-token target)."""
        if self.input != "text":
            raise ValueError("this model reads vectors, not text")
        tokens = tuple(tokenize(text))
        if not tokens:
            raise ValueError(f"{origin}: empty input")
        if self.bpe is not None:
            tokens = tuple(self.bpe.encode(list(tokens), is_pretokenized=True).tokens)
        return Example(tokens, None, ("<unk>",), origin)

    def fit(self, example: Example, *, truncate: bool = False) -> Example:
        """``example`` if the model reads it whole, else cut to ``max_len`` with
        ``truncate``: the encoder–decoder is built for sources of at most ``max_len``.

        Raises:
            ValueError: too long, without ``truncate``.
        """
        if len(example) <= self.max_len:
            return example
        if not truncate:
            raise too_long(example, (self.max_len, "the encoder-decoder is built for that"))
        return slice_example(example, 0, self.max_len, "seq2seq")

    @torch.no_grad()
    def decode(
        self,
        examples: list[Example],
        method: Method = "greedy",
        *,
        beam_size: int | None = None,
        temperature: float = 1.0,
        top_k: int | None = None,
        top_p: float | None = None,
        length_scale: float = 1.0,
        seed: int = 0,
        batch_size: int = EVAL_BATCH_SIZE,
        use_cache: bool = True,
    ) -> Decoded:
        """Decode ``examples`` (their targets are ignored) with ``method``.

        ``use_cache=False`` recomputes the whole prefix at every greedy or beam step (the
        reference the KV cache is checked and timed against).
        """
        settings = self.config.seq2seq
        generator = torch.Generator().manual_seed(seed)
        tokens: list[list[str]] = []
        scores: list[float] = []
        started = time.perf_counter()
        for group in batches(examples, batch_size, shuffle=False):
            batch = self.collator(group)
            encoded = encode_batch(self.model, batch)
            longest = int((~batch.source_padding).sum(1).max())
            max_len = min(int(settings.max_output_ratio * longest) + 10, self.max_len)
            extended = batch.num_extended
            result: DecodeResult
            if method == "greedy":
                result = greedy(
                    self.model,
                    encoded,
                    max_len=max_len,
                    num_extended=extended,
                    use_cache=use_cache,
                )
            elif method == "beam":
                result = beam_search(
                    self.model,
                    encoded,
                    beam_size=beam_size or settings.beam_size,
                    max_len=max_len,
                    length_penalty=settings.length_penalty,
                    no_repeat_ngram_size=settings.no_repeat_ngram,
                    num_extended=extended,
                    use_cache=use_cache,
                )
            elif method == "sample":
                result = sample(
                    self.model,
                    encoded,
                    max_len=max_len,
                    temperature=temperature,
                    top_k=top_k,
                    top_p=top_p,
                    generator=generator,
                    num_extended=extended,
                )
            elif method == "nat":
                result = non_autoregressive(
                    self.model, encoded, length_scale=length_scale, num_extended=extended
                )
            else:
                raise ValueError(f"unknown decoding {method!r}; choose greedy, beam, sample, nat")
            for row, ids in enumerate(result.tokens):
                words = batch.extended[row] if batch.extended else []
                tokens.append(self.collator.decode_target(ids, words))
            scores.extend(float(s) for s in result.score.tolist())
        return Decoded(tokens, time.perf_counter() - started, scores)

    def detokenize(self, tokens: list[str]) -> str:
        """Output tokens as text (BPE pieces merged back into words)."""
        if self.bpe is not None:
            return str(self.bpe.decoder.decode(tokens)).strip()
        return " ".join(tokens)

    def translate(
        self,
        text: str,
        method: Method = "greedy",
        *,
        origin: str = "<input>",
        truncate: bool = False,
        **options: Any,
    ) -> str:
        """Decode one source sentence to text (``truncate``: see :meth:`fit`)."""
        example = self.fit(self.example(text, origin), truncate=truncate)
        decoded = self.decode([example], method, **options)
        return self.detokenize(decoded.tokens[0])

    @torch.no_grad()
    def cross_attention_maps(
        self, text: str, method: Method = "greedy", *, truncate: bool = False, **options: Any
    ) -> tuple[list[torch.Tensor], list[str], list[str]]:
        """Decode ``text`` (``truncate``: see :meth:`fit`), then read the decoder's
        cross-attention over the source.

        Returns:
            ``(maps, source_tokens, output_tokens)``: per decoder layer ``(H, T, S)``
            weights, row t being output token t (the last row: EOS) attending to the source.
        """
        example = self.fit(self.example(text), truncate=truncate)
        output = self.decode([example], method, **options).tokens[0]
        target = Example(example.tokens, None, tuple(output) or ("<unk>",), "<output>")
        batch = self.collator([target])
        if not output:  # only EOS was produced
            batch.target_in = batch.target_in[:, :1]
        encoded = encode_batch(self.model, batch)
        result = self.model.decode(
            batch.target_in, encoded, need_weights=True, num_extended=batch.num_extended
        )
        assert result.cross_attentions is not None
        maps = [weights[0] for weights in result.cross_attentions]
        return maps, list(example.tokens or ()), [*output, EOS]

    # ------------------------------------------------------------------ scoring

    def evaluate(
        self,
        split: str = "test",
        method: Method = "greedy",
        *,
        truncate: bool = False,
        **options: Any,
    ) -> dict[str, float]:
        """Decode a split of the training dataset and score it.

        The split is read as training read it (the same held-out dev set, the same cut
        with ``data.overlong = "cut"``); a longer source than the model reads is refused,
        or cut with ``truncate`` (``truncated`` then counts them).

        Returns:
            ``exact_match`` (whole output equals the reference), ``sentences_per_s``,
            ``count``; ``bleu``, ``chrf`` (sacrebleu, on the detokenised text) and
            ``token_error_rate`` (:func:`token_error_rate`) for vocabulary targets; for
            the convex hull ``hull_exact`` (the right polygon, any starting
            vertex) and ``hull_coverage`` (mean area of the predicted polygon ÷ the hull's,
            0 for an invalid one; Vinyals et al.'s two measures).
        """
        if split not in ("train", "dev", "test"):
            raise ValueError(f"unknown split {split!r}; choose train, dev or test")
        data = self.config.data
        examples = getattr(load_seq2seq_splits(self.config, subset=False), split)
        if not examples:
            raise ValueError(f"dataset {data.dataset!r} has no {split} split")
        # Scored against the whole reference, even where training cut the target.
        references = [list(e.label) for e in examples]
        if self.bpe is not None:
            bpe = self.bpe
            examples = [bpe_pair(e, bpe) for e in examples]
        if data.overlong == "cut":
            pointer = self.collator.target == "pointer"
            examples, _ = fit_examples(examples, data.max_len, "cut", "seq2seq", pointer=pointer)
        fitted = [self.fit(example, truncate=truncate) for example in examples]
        truncated = sum(len(a) != len(b) for a, b in zip(examples, fitted, strict=True))
        examples = fitted
        decoded = self.decode(examples, method, **options)
        metrics: dict[str, float] = {
            "exact_match": sum(
                self.detokenize(h) == " ".join(r)
                for h, r in zip(decoded.tokens, references, strict=True)
            )
            / len(examples),
            "sentences_per_s": len(examples) / max(decoded.seconds, 1e-9),
            "count": float(len(examples)),
        }
        if self.collator.target == "pointer" and self.config.data.dataset.startswith("convex"):
            # A set encoder cannot know which point has the smallest index, so the hull's
            # canonical starting vertex is arbitrary to it: hull_exact accepts any rotation
            # of the right counter-clockwise cycle; exact_match demands the canonical one.
            scores = [
                hull_metrics(example.features, [int(t) for t in hypothesis if t.isdigit()])
                for example, hypothesis in zip(examples, decoded.tokens, strict=True)
                if example.features is not None
            ]
            metrics["hull_exact"] = sum(exact for exact, _ in scores) / len(scores)
            metrics["hull_coverage"] = sum(coverage for _, coverage in scores) / len(scores)
        elif self.collator.target != "pointer":
            hypotheses = [self.detokenize(h) for h in decoded.tokens]
            gold = [[" ".join(r) for r in references]]
            # Both sides are the recipe's space-tokenised text ("Das ist gut ."), scored
            # alike by sacrebleu's 13a tokeniser; force=True says that is deliberate.
            metrics["bleu"] = float(sacrebleu.corpus_bleu(hypotheses, gold, force=True).score)
            metrics["chrf"] = float(sacrebleu.corpus_chrf(hypotheses, gold).score)
            metrics["token_error_rate"] = token_error_rate(
                [h.split() for h in hypotheses], references
            )
        if truncated:
            metrics["truncated"] = float(truncated)
        return metrics
