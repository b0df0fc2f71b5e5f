"""Speech to text fine-tuned from a Whisper checkpoint: ``model.pretrained = "whisper-base"``
on a seq2seq speech dataset.

The model is the checkpoint's encoder–decoder (:mod:`selfattn.pretrained.whisper`); the
targets are the transcripts in its byte-level BPE after its task prefix, ending at
``<|endoftext|>`` (:mod:`selfattn.pretrained.whisper_finetune`). The data are
recordings: a spoken-digit recipe's (``digit-strings-espeak``, synthesised again as 16 kHz
samples: :mod:`selfattn.data.recipes.spoken_waves`) or a user's ``path,text`` CSV
(:mod:`selfattn.data.readers.speech_text_csv`). ``seq2seq.encoder_seconds`` sets how
many seconds the encoder reads (Whisper's 30 by default), which decides what a step costs.

The run's checkpoint keeps the tokenizer and the checkpoint's sizes, so ``predict`` and
``eval`` read it without the pretrained folder. Decoding is selfattn's greedy decoding,
beam search or sampling over the model
(:class:`~selfattn.decoding.whisper.WhisperAsEncoderDecoder`), batched.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import torch
from tokenizers import Tokenizer
from torch import Tensor, nn

from selfattn.config import Config, DataConfig
from selfattn.data.batching.splits import DEV_SEED, dev_holdout, dev_note
from selfattn.data.readers.audio import read_audio
from selfattn.data.readers.speech_text_csv import is_speech_text_csv, read_speech_text_csv
from selfattn.data.recipes.spoken_waves import WAVE_RECIPES, spoken_waves
from selfattn.datatypes import DataError, DatasetSplits, Example
from selfattn.decoding.beam import beam_search
from selfattn.decoding.greedy import greedy
from selfattn.decoding.sampling import sample
from selfattn.decoding.whisper import WhisperAsEncoderDecoder
from selfattn.models.option_groups import toml_value
from selfattn.models.seq2seq_options import Seq2SeqConfig
from selfattn.models.spec import TaskSpec
from selfattn.pretrained.transcribe import WhisperTokenizer, word_error_rate
from selfattn.pretrained.weights import pretrained_folder
from selfattn.pretrained.whisper import WhisperConfig, WhisperModel, is_whisper_checkpoint
from selfattn.pretrained.whisper_finetune import (
    IGNORE,
    FineTunedWhisper,
    WhisperBatch,
    WhisperCollator,
    config_from_dict,
    config_to_dict,
    teacher_forced_metrics,
    whisper_loss,
)
from selfattn.speech.whisper_mel import WHISPER_SAMPLE_RATE
from selfattn.tasks.scored_data import DataFile
from selfattn.tasks.seq2seq.scoring import token_error_rate
from selfattn.tasks.task import AttentionFigure, Task, register_task

#: The task type's name (a checkpoint's ``TaskSpec.task``).
WHISPER_TASK = "whisper"
#: The ``[seq2seq]`` fields Whisper reads; any other set is refused.
_SEQ2SEQ_READ = {"decoding", "beam_size", "length_penalty", "encoder_seconds"}
#: Decoding stops after this many tokens per second of recording, plus 10.
TOKENS_PER_SECOND = 10
#: Recordings decoded at once.
DECODE_BATCH = 8


def is_whisper_config(config: Config) -> bool:
    """Whether ``config.model.pretrained`` names a Whisper checkpoint."""
    name = _checkpoint(config)
    return name is not None and is_whisper_checkpoint(name)


def _checkpoint(config: Config) -> str | None:
    """``model.pretrained`` (``None``: none, or a model section without it)."""
    name = getattr(config.model, "pretrained", None)
    return None if name is None else str(name)


@register_task
class WhisperTask(Task):
    """Recordings → transcripts by a fine-tuned Whisper checkpoint."""

    name = WHISPER_TASK
    layout = "seq2seq"
    options = frozenset(
        {"method", "beam_size", "temperature", "top_k", "top_p", "length_penalty", "seed"}
    )

    @classmethod
    def claims(cls, config: Config) -> bool:
        """A Whisper checkpoint in ``model.pretrained`` is fine-tuned here."""
        return is_whisper_config(config)

    @classmethod
    def check_architecture(cls, config: Config) -> None:
        """Whisper's architecture is the checkpoint's: ``model.architecture`` stays unset."""
        if config.model.architecture != "transformer":
            raise ValueError(
                f"model.architecture = {config.model.architecture!r}: a Whisper checkpoint "
                "(model.pretrained) brings its own encoder–decoder; leave it out"
            )

    @classmethod
    def check_config(cls, config: Config, *, text: bool | None) -> None:
        """Refuse a ``[model]`` field besides ``pretrained``, a ``[seq2seq]`` field Whisper
        does not read, or text data, in one line."""
        if text:
            raise DataError(
                f"model.pretrained = {_checkpoint(config)!r}: Whisper reads recordings; "
                f"dataset {config.data.dataset!r} is text"
            )
        defaults = type(config.model)()
        for item in dataclasses.fields(config.model):
            value = getattr(config.model, item.name)
            if item.name != "pretrained" and value != getattr(defaults, item.name):
                raise ValueError(
                    f"model.{item.name} = {toml_value(value)}: a Whisper checkpoint fixes its "
                    "own shape and dropout; leave it out"
                )
        plain = Seq2SeqConfig()
        for item in dataclasses.fields(plain):
            value = getattr(config.seq2seq, item.name)
            if item.name not in _SEQ2SEQ_READ and value != getattr(plain, item.name):
                raise ValueError(
                    f"seq2seq.{item.name} = {toml_value(value)}: not read when fine-tuning a "
                    f"Whisper checkpoint (it reads {', '.join(sorted(_SEQ2SEQ_READ))})"
                )
        plain_data = DataConfig(config.data.dataset)
        if config.data.max_len != plain_data.max_len:
            raise ValueError(
                f"data.max_len = {config.data.max_len}: a Whisper checkpoint fixes what it "
                "reads (30 s of audio, its decoder's positions); leave it out"
            )
        if config.seq2seq.decoding == "nat":
            raise ValueError("seq2seq.decoding = 'nat': Whisper decodes left to right")

    def __init__(self, config: Config, spec: TaskSpec | None = None) -> None:
        super().__init__(config, spec)
        self.input = "vectors"
        self.collator: WhisperCollator | None = None
        #: The checkpoint's folder, whose weights :meth:`build` loads (``None`` once
        #: restored from a run: the run holds the fine-tuned weights).
        self.folder: Path | None = None

    # ------------------------------------------------------------------ data

    def load_splits(self) -> DatasetSplits:
        """A spoken-digit recipe's recordings, or a user's ``path,text`` CSV files (a dev
        set held out of the training file when there is no ``data.dev``)."""
        data = self.config.data
        if data.dataset in WAVE_RECIPES:
            return spoken_waves(data.dataset)
        path = Path(data.dataset)
        if not path.is_file() or not is_speech_text_csv(path):
            choices = ", ".join(sorted(WAVE_RECIPES))
            raise DataError(
                f"data.dataset = {data.dataset!r}: a Whisper checkpoint fine-tunes on "
                f"recordings: {choices}, or a CSV file whose header is path,text"
            )
        train = read_speech_text_csv(path, max_seconds=30.0)
        dev = [] if data.dev is None else read_speech_text_csv(data.dev, max_seconds=30.0)
        test = [] if data.test is None else read_speech_text_csv(data.test, max_seconds=30.0)
        held_out = data.dev is None and data.dev_fraction > 0
        if held_out:
            train, dev = dev_holdout(train, data.dev_fraction, DEV_SEED, stratify=False)
        return DatasetSplits(
            name=path.stem,
            task="seq2seq",
            input="vectors",
            train=train,
            dev=dev,
            test=test,
            dev_from_train=held_out,
        )

    def prepare(self, splits: DatasetSplits) -> list[str]:
        """The checkpoint's tokenizer and sizes; every transcript checked to fit."""
        data = self.config.data
        if not splits.train:
            raise ValueError(f"dataset {data.dataset!r} has no training examples")
        recipe = data.dataset in WAVE_RECIPES
        note = dev_note(splits, dev_file=recipe or data.dev is not None, fraction=data.dev_fraction)
        name = _checkpoint(self.config)
        assert name is not None  # claims() saw it
        self.folder = pretrained_folder(name)
        whisper = WhisperConfig.from_folder(self.folder)
        tokenizer = WhisperTokenizer.from_folder(self.folder)
        self.spec = _spec(whisper, data.max_len)
        self.collator = self._collator(tokenizer, whisper)
        for part in (splits.train, splits.dev, splits.test):
            for example in part:
                if len(self.collator.ids(" ".join(example.label))) > self.collator.max_tokens:
                    raise DataError(
                        f"{example.source}: the transcript is longer than Whisper's decoder "
                        f"reads ({self.collator.max_tokens} tokens)"
                    )
        return [note] if note else []

    def _collator(self, tokenizer: WhisperTokenizer, whisper: WhisperConfig) -> WhisperCollator:
        return WhisperCollator(
            tokenizer, whisper, encoder_seconds=self.config.seq2seq.encoder_seconds
        )

    def state(self) -> dict[str, Any]:
        assert self.collator is not None
        return {
            "task": WHISPER_TASK,
            "input": "vectors",
            "tokenizer": self.collator.tokenizer.tokenizer.to_str(),
        }

    def restore(self, stored: dict[str, Any]) -> None:
        assert self.spec is not None and self.spec.pretrained is not None
        whisper = config_from_dict(self.spec.pretrained)
        tokenizer = WhisperTokenizer.from_tokenizer(Tokenizer.from_str(stored["tokenizer"]))
        self.collator = self._collator(tokenizer, whisper)

    def collate(self, examples: Sequence[Example]) -> WhisperBatch:
        assert self.collator is not None, "prepare() or restore() the task first"
        return self.collator(examples)

    def batches_of(self, examples: list[Example]) -> list[Any]:
        """``examples`` in file order, in batches of ``data.batch_size`` (a 30 s window
        costs too much memory in batches of 64)."""
        size = self.config.data.batch_size
        return [self.collate(examples[i : i + size]) for i in range(0, len(examples), size)]

    # ------------------------------------------------------------------ training

    def build(self) -> nn.Module:
        """The checkpoint's model; a prepared task loads its weights, and freezes the
        encoder with ``train.freeze_encoder``."""
        assert self.spec is not None and self.spec.pretrained is not None
        if self.folder is None:
            return FineTunedWhisper(config_from_dict(self.spec.pretrained), self.spec)
        model = FineTunedWhisper.from_pretrained(self.folder, self.spec)
        if self.config.train.freeze_encoder:
            model.encoder.requires_grad_(False)
        return model

    def loss(self, model: Any, batch: Any, step: int) -> Tensor:
        return whisper_loss(model, batch, self.config.train.label_smoothing)

    def evaluate(
        self, model: Any, batches: Iterable[Any], *, device: torch.device | str | None = None
    ) -> dict[str, float]:
        return teacher_forced_metrics(model, batches, device)

    # ------------------------------------------------------------------ inference

    def example(self, text: str, source: str = "<input>") -> Example:
        raise ValueError(f"{source}: this model transcribes recordings (a .wav or .flac file)")

    def read_file(self, argument: str) -> Example | None:
        """A recording to transcribe (any rate: resampled to 16 kHz)."""
        samples, _ = read_audio(argument, sample_rate=WHISPER_SAMPLE_RATE)
        return Example(None, samples[:, None], ("",), argument)

    def unlabelled(self, example: Example) -> Example:
        return dataclasses.replace(example, label=("",))

    def fit(self, model: nn.Module, example: Example, *, truncate: bool = False) -> Example:
        """The recording if it fits Whisper's window, else cut to it with ``truncate``."""
        assert self.collator is not None and example.features is not None
        window = self.collator.window
        if example.features.shape[0] <= window:
            return example
        if not truncate:
            seconds = example.features.shape[0] / WHISPER_SAMPLE_RATE
            raise ValueError(
                f"{example.source}: {seconds:.1f} s long; the encoder reads at most "
                f"{window / WHISPER_SAMPLE_RATE:g} s (pass --truncate to keep the first 30 s)"
            )
        return dataclasses.replace(example, features=example.features[:window])

    def describe(self, options: dict[str, Any]) -> dict[str, Any]:
        return {"decoding": options.get("method") or self.config.seq2seq.decoding}

    @torch.no_grad()
    def transcribe(
        self, model: WhisperModel, examples: Sequence[Example], **options: Any
    ) -> list[str]:
        """The transcripts of ``examples``, decoded in batches (``method``: greedy, beam
        or sample, with their options; default the config's ``seq2seq.decoding``)."""
        self.check_options(options)
        assert self.collator is not None
        settings = self.config.seq2seq
        method = options.get("method") or settings.decoding
        if method not in ("greedy", "beam", "sample"):
            raise ValueError(f"Whisper decodes with greedy, beam or sample, not {method!r}")
        if "length_penalty" in options and method != "beam":
            raise ValueError(f"--length-penalty applies to beam search, not {method} decoding")
        model.eval()
        adapter = WhisperAsEncoderDecoder(model, self.collator.prefix)
        decoder: Any = adapter  # an EncoderDecoder by its shape
        generator = torch.Generator().manual_seed(int(options.get("seed", 0)))
        texts: list[str] = []
        for start in range(0, len(examples), DECODE_BATCH):
            batch = self.collator(examples[start : start + DECODE_BATCH])
            weight = next(model.parameters())
            encoded = adapter.encode(batch.features.to(weight.device))
            max_len = min(adapter.max_len, int(TOKENS_PER_SECOND * max(batch.seconds)) + 10)
            if method == "beam":
                result = beam_search(
                    decoder,
                    encoded,
                    beam_size=int(options.get("beam_size") or settings.beam_size),
                    max_len=max_len,
                    length_penalty=float(options.get("length_penalty", settings.length_penalty)),
                )
            elif method == "sample":
                result = sample(
                    decoder,
                    encoded,
                    max_len=max_len,
                    temperature=float(options.get("temperature", 1.0)),
                    top_k=options.get("top_k"),
                    top_p=options.get("top_p"),
                    generator=generator,
                )
            else:
                result = greedy(decoder, encoded, max_len=max_len)
            for ids in result.tokens:
                whisper_ids = [int(adapter.to_whisper[i]) for i in ids]
                texts.append(self.collator.tokenizer.decode(whisper_ids))
        return texts

    def predict(self, model: nn.Module, example: Example, **options: Any) -> str:
        assert isinstance(model, WhisperModel)
        return self.transcribe(model, [example], **options)[0]

    def score(
        self, model: nn.Module, split: str | DataFile, *, truncate: bool = False, **options: Any
    ) -> dict[str, float]:
        """Transcribe a split (or a user's ``path,text`` CSV) and score it.

        Returns:
            ``exact_match`` (the transcript's words equal the reference's),
            ``token_error_rate`` (word error rate over whitespace-separated words: the
            digit error rate of spoken digit strings), ``char_error_rate`` (over the
            characters, spaces included), ``word_error_rate`` (over the words as
            :func:`~selfattn.pretrained.transcribe.transcript_words` normalises them: case,
            punctuation and numbers up to twenty set aside, so a transcript in another
            style than the references' is scored by what it says), ``sentences_per_s``,
            ``count``.
        """
        assert isinstance(model, WhisperModel)
        if isinstance(split, DataFile):
            examples = read_speech_text_csv(split.path)
        elif split in ("train", "dev", "test"):
            examples = getattr(self.load_splits(), split)
            if not examples:
                raise ValueError(f"dataset {self.config.data.dataset!r} has no {split} split")
        else:
            raise ValueError(f"unknown split {split!r}; choose train, dev or test")
        examples = [self.fit(model, e, truncate=truncate) for e in examples]
        started = time.perf_counter()
        texts = self.transcribe(model, examples, **options)
        seconds = time.perf_counter() - started
        hypotheses = [text.split() for text in texts]
        references = [list(e.label) for e in examples]
        pairs = list(zip(hypotheses, references, strict=True))
        return {
            "exact_match": sum(h == r for h, r in pairs) / len(pairs),
            "token_error_rate": token_error_rate(hypotheses, references),
            "char_error_rate": token_error_rate(
                [list(" ".join(h)) for h in hypotheses], [list(" ".join(r)) for r in references]
            ),
            "word_error_rate": word_error_rate(texts, [" ".join(r) for r in references]),
            "sentences_per_s": len(pairs) / max(seconds, 1e-9),
            "count": float(len(pairs)),
        }

    @torch.no_grad()
    def attention(
        self, model: nn.Module, example: Example, **options: Any
    ) -> list[AttentionFigure]:
        """The decoder's cross-attention over the encoder's positions (20 ms each) while
        it reads the task prefix and the decoded transcript, per layer ``(H, T, S)``."""
        assert isinstance(model, WhisperModel) and self.collator is not None
        text = self.transcribe(model, [example], **options)[0]
        batch = self.collator([dataclasses.replace(example, label=tuple(text.split()))])
        count = int((batch.targets != IGNORE).sum())  # the transcript's tokens and EOT
        tokens = batch.tokens[:, : len(self.collator.prefix) + count - 1]
        maps = model.decoder.cross_attention(tokens, model.encoder(batch.features))
        pieces = self.collator.tokenizer.tokenizer
        queries = [str(pieces.id_to_token(int(i))) for i in tokens[0]]
        keys = [f"{0.02 * j:.2f}s" for j in range(maps[0].shape[-1])]
        figure = AttentionFigure("cross-attention", [m[0] for m in maps], queries, keys)
        figure.layer = "decoder layer"
        return [figure]


def _spec(whisper: WhisperConfig, max_len: int) -> TaskSpec:
    """What a checkpoint of the fine-tuned model stores to rebuild it (``max_len``: the
    config's, which Whisper does not read: its lengths are the checkpoint's)."""
    return TaskSpec(
        task="seq2seq",
        task_type=WHISPER_TASK,
        num_labels=whisper.vocab_size,
        feature_dim=1,
        max_len=max_len,
        pretrained=config_to_dict(whisper),
    )
