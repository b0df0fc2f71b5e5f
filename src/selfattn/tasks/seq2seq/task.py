"""The ``seq2seq`` task type: the model decides the output's length (lecture 001 §3–5).

Its data road builds the vocabularies (words, or one BPE vocabulary learned on both
sides) and the collator; its objective is teacher forcing with the options of
``[seq2seq]`` (:class:`~selfattn.tasks.seq2seq.objective.Seq2SeqObjective`); a prediction
decodes (greedy, beam, sampling or non-autoregressive: :mod:`.decoding`); a split is
scored with BLEU and chrF (sacrebleu) for text targets, exact match for every target, the
token (digit) error rate, and area coverage for the convex hull; its attention maps are
the encoder's self-attention, the decoder's masked self-attention and the cross-attention
of the decoded output over the source.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from typing import Any

import torch
from tokenizers import Tokenizer
from torch import Tensor, nn

from selfattn.config import Config
from selfattn.data import DatasetSplits, Example, Vocabulary, tokenize
from selfattn.data.batching.lengths import cut_note, fit_examples, fit_splits, slice_example
from selfattn.data.batching.seq2seq_collate import Seq2SeqBatch, Seq2SeqCollator
from selfattn.data.batching.splits import dev_note, stratified_subset
from selfattn.data.readers.label_sets import LABEL_SET_TARGETS, decoded_set
from selfattn.data.readers.user_input import input_format
from selfattn.data.recipes import RECIPES
from selfattn.data.vocab import train_bpe
from selfattn.models.seq2seq_builder import (
    SEQ2SEQ_MODELS,
    Seq2SeqModel,
    build_seq2seq_model,
    check_seq2seq_model,
)
from selfattn.models.task_model import TaskSpec, check_fields
from selfattn.specials import BOS, EOS, UNK
from selfattn.tasks.scored_data import DataFile, scored_examples
from selfattn.tasks.seq2seq.decoding import (
    OPTIONS,
    decode_examples,
    decoding_method,
)
from selfattn.tasks.seq2seq.maps import seq2seq_figures
from selfattn.tasks.seq2seq.objective import Seq2SeqObjective
from selfattn.tasks.seq2seq.scoring import Decoded, bpe_pair, hull_scores, text_scores
from selfattn.tasks.seq2seq.search import Method
from selfattn.tasks.seq2seq.sequence_level import SequenceLevelObjective
from selfattn.tasks.seq2seq.vocabularies import seq2seq_vocabularies
from selfattn.tasks.set_metrics import set_scores
from selfattn.tasks.task import (
    AttentionFigure,
    Task,
    on_model_device,
    positions,
    register_task,
    too_long,
)


@register_task
class Seq2SeqTask(Task):
    """An output sequence whose length the model decides."""

    name = "seq2seq"
    layout = "seq2seq"
    accepts = frozenset({"encoder_stack", "sequence"})
    objectives = ("mle", "mrt", "reinforce")
    options = OPTIONS

    @classmethod
    def check_config(cls, config: Config, *, text: bool | None) -> None:
        if config.model.architecture == "rnn":  # the RNN's builder has checks of its own
            check_fields(config.model, task="seq2seq", text=text)
        else:
            check_seq2seq_model(config.model, config.seq2seq, text=text)

    def __init__(self, config: Config, spec: TaskSpec | None = None) -> None:
        super().__init__(config, spec)
        self.bpe: Tokenizer | None = None
        self.collator: Seq2SeqCollator | None = None
        self.objective = Seq2SeqObjective.of(config)
        self.sequence_objective = (
            None
            if config.train.objective == "mle"
            else SequenceLevelObjective(
                config.train, config.seq2seq, self._output_text, self.objective
            )
        )

    # ------------------------------------------------------------------ data

    def prepare(self, splits: DatasetSplits) -> list[str]:
        """Vocabularies and collator for ``splits``.

        Text: with ``data.bpe_vocab_size`` one BPE vocabulary is learned on the training
        sources and targets together (so ``seq2seq.share_embeddings`` can share one
        table), otherwise word vocabularies with ``data.min_freq``. Vector sources need
        none.
        """
        data, output = self.config.data, self.config.seq2seq.output
        if not splits.train:
            raise ValueError(f"dataset {data.dataset!r} has no training examples")
        note = dev_note(
            splits,
            dev_file=data.dev is not None or data.dataset in RECIPES,
            fraction=data.dev_fraction,
        )
        notes = [note] if note else []
        splits.train = stratified_subset(splits.train, data.train_fraction, stratify=False)
        self.input = splits.input
        text = splits.input == "text"
        if text and data.bpe_vocab_size is not None:
            if self.inherited.get("bpe"):
                # The tokenizers library numbers the learned pieces in a different order
                # each time (83 of translate-de-en's 3,998 ids move): the ids the
                # weights were trained with come from the run itself.
                self.bpe = Tokenizer.from_str(self.inherited["bpe"])
            else:
                corpus = [" ".join(e.tokens or ()) for e in splits.train]
                corpus += [" ".join(e.label) for e in splits.train]
                self.bpe = train_bpe(
                    corpus,
                    data.bpe_vocab_size,
                    lowercase=data.lowercase,
                    extra_specials=(BOS, EOS),
                )
            bpe = self.bpe
            splits.train, splits.dev, splits.test = (
                [bpe_pair(e, bpe) for e in part] for part in (splits.train, splits.dev, splits.test)
            )
        cut = fit_splits(splits, data.max_len, data.overlong, pointer=output == "pointer")
        if cut:
            notes.append(cut_note(cut, data.max_len))
        source_vocab, target_vocab = seq2seq_vocabularies(
            splits, self.bpe, output, min_freq=data.min_freq, lowercase=data.lowercase
        )
        features = splits.train[0].features
        self.spec = TaskSpec(
            task=self.layout,
            task_type=self.name,
            num_labels=0 if target_vocab is None else len(target_vocab),
            vocab_size=None if source_vocab is None else len(source_vocab),
            feature_dim=None if features is None else int(features.shape[1]),
            max_len=data.max_len,
        )
        self.reader = input_format(splits)
        self.collator = Seq2SeqCollator(
            source_vocab,
            target_vocab,
            target=output,
            max_source_len=self.spec.max_len,
            max_target_len=self.spec.max_len,
        )
        return notes

    def state(self) -> dict[str, Any]:
        assert self.collator is not None
        source, target = self.collator.source_vocab, self.collator.target_vocab
        return {
            "task": self.name,
            "input": self.input,
            "source": None if source is None else source.to_dict(),
            "target": None if target is None else target.to_dict(),
            "output": self.collator.target,
            "bpe": None if self.bpe is None else self.bpe.to_str(),
            "reader": self.reader,
        }

    def restore(self, stored: dict[str, Any]) -> None:
        assert self.spec is not None
        self.input = stored["input"]
        self.bpe = Tokenizer.from_str(stored["bpe"]) if stored.get("bpe") else None
        self.reader = dict(stored.get("reader") or {})
        source = Vocabulary.from_dict(stored["source"]) if stored.get("source") else None
        target = Vocabulary.from_dict(stored["target"]) if stored.get("target") else None
        self.collator = Seq2SeqCollator(
            source,
            target,
            target=stored["output"],
            max_source_len=self.spec.max_len,
            max_target_len=self.spec.max_len,
        )

    def collate(self, examples: Sequence[Example]) -> Seq2SeqBatch:
        assert self.collator is not None, "prepare() or restore() the task first"
        return self.collator(examples)

    # ------------------------------------------------------------------ training

    def build(self) -> nn.Module:
        assert self.spec is not None
        return build_seq2seq_model(self.config.model, self.config.seq2seq, self.spec)

    def loss(self, model: Any, batch: Any, step: int) -> Tensor:
        if self.sequence_objective is None:
            return self.objective.loss(model, batch, step)
        return self.sequence_objective.loss(model, batch, step)

    def _output_text(self, ids: list[int], batch: Seq2SeqBatch, row: int) -> str:
        """Output ids of example ``row`` of ``batch`` as the detokenised text that
        :meth:`score` scores (what MRT's and REINFORCE's costs compare)."""
        assert self.collator is not None
        words = batch.extended[row] if batch.extended else []
        return self.detokenize(self.collator.decode_target(ids, words))

    def evaluate(
        self, model: Any, batches: Iterable[Any], *, device: torch.device | str | None = None
    ) -> dict[str, float]:
        return self.objective.evaluate(model, batches, device=device)

    # ------------------------------------------------------------------ inference

    def example(self, text: str, source: str = "<input>") -> Example:
        """An unlabelled source from text (a dummy one-token target)."""
        tokens = tuple(tokenize(text))
        if not tokens:
            raise ValueError(f"{source}: empty input")
        if self.bpe is not None:
            tokens = tuple(self.bpe.encode(list(tokens), is_pretokenized=True).tokens)
        return Example(tokens, None, (UNK,), source)

    def unlabelled(self, example: Example) -> Example:
        """A source read from a file (vectors), with a dummy one-token target (a source
        position for a pointer network)."""
        return dataclasses.replace(example, label=self._dummy_target())

    def _dummy_target(self) -> tuple[str, ...]:
        assert self.collator is not None
        return ("0",) if self.collator.target == "pointer" else (UNK,)

    def fit(self, model: nn.Module, example: Example, *, truncate: bool = False) -> Example:
        """``example`` if the model reads it whole, else cut to ``max_len`` with
        ``truncate``: the encoder–decoder is built for sources of at most ``max_len``."""
        assert self.spec is not None
        size = self.spec.max_len
        if len(example) <= size:
            return example
        if not truncate:
            raise too_long(example, (size, "the encoder-decoder is built for that"))
        return slice_example(example, 0, size, "seq2seq")

    def describe(self, options: dict[str, Any]) -> dict[str, Any]:
        return {"decoding": self.method(options)}

    def method(self, options: dict[str, Any]) -> Method:
        """The decoding method of ``options`` (default: the config's ``seq2seq.decoding``)."""
        return decoding_method(options, self.config.seq2seq.decoding)

    def decode(
        self,
        model: Seq2SeqModel,
        examples: list[Example],
        method: Method | None = None,
        **options: Any,
    ) -> Decoded:
        """Decode ``examples`` (their targets are ignored) with ``method`` (default: the
        config's ``seq2seq.decoding``) and the options of :func:`.decode_examples`."""
        assert self.collator is not None and self.spec is not None
        method = self.method({"method": method})
        settings, limit = self.config.seq2seq, self.spec.max_len
        return decode_examples(
            model, self.collator, examples, method, settings, max_len=limit, **options
        )

    def detokenize(self, tokens: list[str]) -> str:
        """Output tokens as text (BPE pieces merged back into words)."""
        if self.bpe is not None:
            return str(self.bpe.decoder.decode(tokens)).strip()
        return " ".join(tokens)

    def predict(self, model: nn.Module, example: Example, **options: Any) -> str:
        """The decoded output as text."""
        self.check_options(options)
        assert isinstance(model, SEQ2SEQ_MODELS)
        method = self.method(options)
        rest = {name: value for name, value in options.items() if name != "method"}
        return self.detokenize(self.decode(model, [example], method, **rest).tokens[0])

    def score(
        self, model: nn.Module, split: str | DataFile, *, truncate: bool = False, **options: Any
    ) -> dict[str, float]:
        """Decode a split of the training dataset (or a user's file of its format:
        :mod:`~selfattn.tasks.scored_data`) and score it.

        The split is read as training read it (the same held-out dev set, the same cut
        with ``data.overlong = "cut"``); a longer source than the model reads is refused,
        or cut with ``truncate`` (``truncated`` then counts them).

        Returns:
            ``exact_match`` (whole output equals the reference), ``sentences_per_s``,
            ``count``; ``bleu``, ``chrf`` (sacrebleu, on the detokenised text) and
            ``token_error_rate`` (:func:`token_error_rate`) for vocabulary targets; for
            the convex hull ``hull_exact`` (the right polygon, any starting vertex) and
            ``hull_coverage`` (mean area of the predicted polygon ÷ the hull's, 0 for an
            invalid one; Vinyals et al.'s two measures); for label sets written as
            sequences (:func:`~selfattn.data.readers.label_sets.label_set_targets`) the
            multilabel task's ``set_f1``, ``micro_f1`` and ``exact_match`` of the decoded
            sets (:mod:`~selfattn.tasks.set_metrics`), the whole sequence's match then
            ``sequence_exact_match``.
        """
        self.check_options(options)
        assert isinstance(model, SEQ2SEQ_MODELS) and self.collator is not None
        data = self.config.data
        examples, splits = scored_examples(self, split)
        # Scored against the whole reference, even where training cut the target.
        references = [list(e.label) for e in examples]
        if self.bpe is not None:
            bpe = self.bpe
            examples = [bpe_pair(e, bpe) for e in examples]
        pointer = self.collator.target == "pointer"
        if data.overlong == "cut":
            examples, _ = fit_examples(examples, data.max_len, "cut", "seq2seq", pointer=pointer)
        fitted = [self.fit(model, example, truncate=truncate) for example in examples]
        truncated = sum(len(a) != len(b) for a, b in zip(examples, fitted, strict=True))
        examples = fitted
        method = self.method(options)
        rest = {name: value for name, value in options.items() if name != "method"}
        decoded = self.decode(model, examples, method, **rest)
        metrics: dict[str, float] = {
            "exact_match": sum(
                self.detokenize(h) == " ".join(r)
                for h, r in zip(decoded.tokens, references, strict=True)
            )
            / len(examples),
            "sentences_per_s": len(examples) / max(decoded.seconds, 1e-9),
            "count": float(len(examples)),
        }
        if pointer and data.dataset.startswith("convex"):
            metrics.update(hull_scores(examples, decoded))
        elif not pointer:
            hypotheses = [self.detokenize(h) for h in decoded.tokens]
            # A recipe names the BLEU tokenisation of its target language (zh: Chinese).
            tokenize = splits.extra.get("bleu_tokenize", "13a")
            metrics.update(text_scores(hypotheses, references, tokenize=tokenize))
        if splits.extra.get("targets") == LABEL_SET_TARGETS:
            # The multilabel task's numbers on the decoded sets (duplicates and <none> out).
            metrics["sequence_exact_match"] = metrics["exact_match"]
            metrics.update(
                set_scores(
                    [decoded_set(self.detokenize(h).split()) for h in decoded.tokens],
                    [decoded_set(r) for r in references],
                )
            )
        if truncated:
            metrics["truncated"] = float(truncated)
        return metrics

    @torch.no_grad()
    def cross_attention_maps(
        self, model: Seq2SeqModel, example: Example, **options: Any
    ) -> tuple[list[Tensor], list[str], list[str]]:
        """Decode ``example``, then read the decoder's cross-attention over the source.

        Returns:
            ``(maps, source_tokens, output_tokens)``: per decoder layer ``(H, T, S)``
            weights, row t being output token t (the last row: EOS) attending to the source.
        """
        figures = self.attention(model, example, **options)
        cross = next(figure for figure in figures if figure.title == "cross-attention")
        return cross.maps, cross.keys, cross.queries

    @torch.no_grad()
    def attention(
        self, model: nn.Module, example: Example, **options: Any
    ) -> list[AttentionFigure]:
        """Decode ``example``, then teacher-force the decoded output to read the encoder's
        self-attention (source × source), the decoder's masked self-attention (output ×
        output) and its cross-attention (output × source), per layer ``(H, T, S)``; the
        decoder's rows end with EOS. An RNN encoder–decoder has only the cross-attention
        (one layer of one head: the match weights α̂)."""
        self.check_options(options)
        assert isinstance(model, SEQ2SEQ_MODELS) and self.collator is not None
        method = self.method(options)
        rest = {name: value for name, value in options.items() if name != "method"}
        output = self.decode(model, [example], method, **rest).tokens[0]
        target = Example(
            example.tokens, example.features, tuple(output) or self._dummy_target(), "<output>"
        )
        batch = on_model_device(self.collator([target]), model)
        if not output:  # only EOS was produced
            batch.target_in = batch.target_in[:, :1]
        maps = model.attention_maps(
            batch.source,
            batch.source_padding,
            batch.target_in,
            copy_ids=batch.copy_ids,
            num_extended=batch.num_extended,
        )
        return seq2seq_figures(maps, positions(example), [*output, EOS])
