"""The sections of a run's configuration as frozen dataclasses: ``[data]``, ``[train]``
(here), ``[model]`` (its architecture's options,
:func:`~selfattn.models.registry.model_options`) and ``[seq2seq]``
(:mod:`selfattn.models.seq2seq_options`), and the whole :class:`Config`."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from selfattn.config.sequence_fields import check_sequence_fields
from selfattn.models.architectures.transformer import TransformerOptions
from selfattn.models.option_groups import ModelOptions
from selfattn.models.seq2seq_options import Seq2SeqConfig

Schedule = Literal["linear", "cosine", "constant"]
DeviceName = Literal["cpu", "cuda", "auto"]
DataTask = Literal["auto", "seq2seq", "regression"]
Overlong = Literal["refuse", "cut"]
Strategy = Literal["ddp", "fsdp"]
ObjectiveName = Literal["mle", "mrt", "reinforce"]
CandidatesName = Literal["sample", "beam", "both"]
CostName = Literal["auto", "bleu", "token_error"]


@dataclass(frozen=True)
class DataConfig:
    """Where the data come from and how they are turned into batches.

    Attributes:
        dataset: a recipe name (``"pos-wsj"``) or the path of a training file.
        dev: path of a development file (default: the recipe's dev split).
        test: path of a test file (default: the recipe's test split).
        batch_size: examples per batch.
        max_len: the longest sequence the model is built for (it sizes positional tables and
            is stored as the checkpoint's ``max_len``). A longer example in any split is
            refused when the data are loaded, before training, or cut (``overlong``).
        lowercase: lowercase text before building the vocabulary.
        min_freq: words seen fewer times in training become the unknown word.
        bpe_vocab_size: split words into this many byte-pair units; ``None``: whole words.
            For seq2seq text, one subword vocabulary is learned on both sides.
        task: ``auto`` (a recipe knows its task; a user's file is read by its extension),
            ``seq2seq`` (a user's file holds ``source<TAB>target`` lines) or
            ``regression`` (a user's file holds one number per example as its label).
        train_fraction: train on this fraction of the training split, in (0, 1]: a
            seeded subset (stratified by label for classification of whole sets), nested
            across fractions (10 % ⊂ 30 % ⊂ 100 %;
            :func:`~selfattn.data.batching.splits.stratified_subset`). Dev and test stay whole.
            For data-size experiments and quick runs on long-input tasks.
        dev_fraction: a user's data without ``dev``: hold out this fraction of the
            training file as the dev set, in [0, 1) — seeded (seed 0), stratified by
            label for classification of whole sequences, the same in every run and in
            ``selfattn eval --split dev``. ``0``: train without a dev set (the best
            epoch is then the one with the lowest training loss). Recipes keep their
            own dev splits.
        overlong: what a sequence longer than ``max_len`` gets: ``refuse`` (a one-line
            error naming its ``file:line``) or ``cut`` (keep its first ``max_len``
            tokens and, for a token task, their labels; for seq2seq the source and the
            target are each cut).
    """

    dataset: str
    dev: str | None = None
    test: str | None = None
    batch_size: int = 32
    max_len: int = 256
    lowercase: bool = False
    min_freq: int = 1
    bpe_vocab_size: int | None = None
    task: DataTask = "auto"
    train_fraction: float = 1.0
    dev_fraction: float = 0.1
    overlong: Overlong = "refuse"

    def __post_init__(self) -> None:
        for name in ("batch_size", "max_len", "min_freq"):
            if getattr(self, name) < 1:
                raise ValueError(f"data.{name} must be >= 1, got {getattr(self, name)}")
        if not 0.0 < self.train_fraction <= 1.0:
            raise ValueError(f"data.train_fraction must be in (0, 1], got {self.train_fraction}")
        if not 0.0 <= self.dev_fraction < 1.0:
            raise ValueError(f"data.dev_fraction must be in [0, 1), got {self.dev_fraction}")
        if self.bpe_vocab_size is not None and self.bpe_vocab_size < 1:
            raise ValueError(f"data.bpe_vocab_size must be >= 1, got {self.bpe_vocab_size}")


@dataclass(frozen=True)
class TrainConfig:
    """How to optimise.

    Attributes:
        epochs: passes over the training data (at most; see ``patience``).
        lr: peak learning rate of AdamW.
        weight_decay: AdamW's decoupled weight decay (not applied to biases and norms).
        warmup_steps: steps of linear warm-up from 0 to ``lr``.
        schedule: after warm-up, ``linear`` decay to 0, ``cosine`` decay to 0, or
            ``constant``.
        label_smoothing: ε of label-smoothed cross-entropy.
        grad_clip: clip the global gradient norm to this; ``None``: no clipping.
        amp: mixed precision (bf16 where supported, else fp16 with loss scaling). Only
            on CUDA: on the CPU it is ignored with a warning.
        tf32: float32 matrix products on TensorFloat-32 tensor cores (a 10-bit mantissa,
            float32's range; :mod:`selfattn.train.precision`) while training on a CUDA GPU
            of the Ampere generation or later. Only on CUDA: on the CPU it is ignored with
            a warning.
        seed: seeds Python, NumPy and torch, hence initialisation, dropout and batch order.
        patience: stop after this many epochs without a better dev accuracy; ``None``:
            never stop early.
        device: ``cpu``, ``cuda``, or ``auto`` (CUDA when available).
        checkpoint_every: also save ``run_dir/last`` during an epoch, so that a run
            stopped or killed mid-epoch loses little work and resumes exactly where it
            was: ``None`` saves every ``CHECKPOINT_SECONDS`` (120 s) of wall-clock time,
            an integer N every N optimizer steps. ``last`` is always saved at the end of
            an epoch too, and ``best`` only there. Saving draws no random numbers, so it
            never changes the run.
        threads: CPU threads for PyTorch's kernels (the same as ``--threads``). ``None``:
            the count the process already runs with — in a ``selfattn`` command, as many
            as the cores other processes leave idle when it starts, at least 1
            (:func:`selfattn.runtime.default_threads`); in your own script, PyTorch's
            (one per core) or whatever you set.
        layer_lr_decay: layer-wise learning-rate decay (Clark et al. 2020, ELECTRA;
            the usual fine-tuning recipe): the head trains at ``lr``, the block below it
            at ``lr · d``, the next at ``lr · d²``, down to the embeddings. In (0, 1];
            ``1`` is one rate for all. Needs a stack of blocks (``model.pretrained``, a
            ``transformer`` or ``conformer``).
        freeze_encoder: train only the head on a pretrained encoder's fixed outputs (a
            linear probe); needs ``model.pretrained``.
        checkpoint_activations: recompute each block's activations in the backward pass
            instead of storing them (per-block activation checkpointing): less memory for
            about one more forward pass per step, the same gradients (dropout included).
            Every stack of blocks (transformer, conformer, graph, seq2seq encoder and
            decoder, a pretrained BERT); an architecture without one is refused.
        keep_epochs: also keep the checkpoint of each of the last N epochs as
            ``run_dir/epoch-E/``, for ``selfattn average``; ``0`` keeps none.
        distributed: how several processes train (read only when torchrun, or
            ``selfattn train --nproc N``, starts more than one; see
            :mod:`selfattn.train.distributed`): ``ddp`` keeps a copy of the model in each
            process (DistributedDataParallel); ``fsdp`` shards parameters, gradients and
            optimizer state across them (FSDP2, per block of every stack).
        distributed_timeout: seconds a process waits for the others at a collective
            before the job fails with an error (a rank that died or hangs).
        max_steps: stop after this many optimizer steps (the schedule decays over them;
            the last epoch may end early); ``None``: run every epoch.
        max_minutes: a wall-clock budget for this process's training (fairseq's
            ``--stop-time-hours``): no epoch starts that the mean epoch time says would
            end past it, and a step that ends past it stops the run there with ``last``
            saved (the unfinished epoch is not scored); ``--resume`` goes on with a new
            budget. The schedule still decays over ``epochs``. ``None``: no budget.
        init_from: start from the weights of this run folder (its ``best``) or checkpoint
            instead of a fresh initialisation (fine-tuning); the run must build the same
            model with the same vocabularies, else it is refused.
        objective: what a seq2seq model is trained to do: ``mle`` (teacher-forced
            likelihood), ``mrt`` (minimum risk training, Shen et al. 2016) or
            ``reinforce`` (REINFORCE with a leave-one-out baseline); the last two train
            on the model's own outputs (:mod:`selfattn.tasks.seq2seq.sequence_level`).
        sequence_samples: k ≥ 2, candidates drawn per source by ``mrt`` / ``reinforce``.
        sequence_candidates: ``sample`` (k samples), ``beam`` (beam search's k-best) or
            ``both`` (deduplicated union); ``reinforce`` needs ``sample``.
        sequence_cost: ``bleu`` (1 − sentence BLEU), ``token_error`` (edit distance ÷
            reference length) or ``auto`` (token error for vector sources such as
            speech, BLEU for text).
        mrt_alpha: α > 0 of MRT's distribution Q(y) ∝ p(y|x)^α over the candidates.
        mrt_reference: MRT also puts the reference among the candidates.
        mle_weight: weight of the usual MLE loss added to the sequence-level one.
    """

    epochs: int = 10
    lr: float = 1e-3
    weight_decay: float = 0.01
    warmup_steps: int = 100
    schedule: Schedule = "linear"
    label_smoothing: float = 0.0
    grad_clip: float | None = 1.0
    amp: bool = False
    tf32: bool = False
    seed: int = 0
    patience: int | None = None
    device: DeviceName = "auto"
    threads: int | None = None
    checkpoint_every: int | None = None
    layer_lr_decay: float = 1.0
    freeze_encoder: bool = False
    checkpoint_activations: bool = False
    keep_epochs: int = 0
    distributed: Strategy = "ddp"
    distributed_timeout: float = 300.0
    max_steps: int | None = None
    max_minutes: float | None = None
    init_from: str | None = None
    objective: ObjectiveName = "mle"
    sequence_samples: int = 4
    sequence_candidates: CandidatesName = "sample"
    sequence_cost: CostName = "auto"
    mrt_alpha: float = 5e-3
    mrt_reference: bool = False
    mle_weight: float = 0.0

    def __post_init__(self) -> None:
        check_sequence_fields(self)
        if self.max_steps is not None and self.max_steps < 1:
            raise ValueError(f"train.max_steps must be >= 1 or none, got {self.max_steps}")
        if self.max_minutes is not None and not self.max_minutes > 0:
            raise ValueError(f"train.max_minutes must be > 0 or none, got {self.max_minutes}")
        if self.distributed_timeout <= 0:
            raise ValueError(
                f"train.distributed_timeout must be > 0, got {self.distributed_timeout}"
            )
        if self.checkpoint_every is not None and self.checkpoint_every < 1:
            raise ValueError(
                f"train.checkpoint_every must be >= 1 or none, got {self.checkpoint_every}"
            )
        if self.threads is not None and self.threads < 1:
            raise ValueError(f"train.threads must be >= 1 or none, got {self.threads}")
        if self.epochs < 1:
            raise ValueError(f"train.epochs must be >= 1, got {self.epochs}")
        if self.lr <= 0:
            raise ValueError(f"train.lr must be > 0, got {self.lr}")
        if self.weight_decay < 0 or self.warmup_steps < 0:
            raise ValueError("train.weight_decay and train.warmup_steps must be >= 0")
        if not 0.0 <= self.label_smoothing < 1.0:
            raise ValueError(f"train.label_smoothing must be in [0, 1), got {self.label_smoothing}")
        if self.grad_clip is not None and self.grad_clip <= 0:
            raise ValueError(f"train.grad_clip must be > 0 or none, got {self.grad_clip}")
        if self.patience is not None and self.patience < 1:
            raise ValueError(f"train.patience must be >= 1 or none, got {self.patience}")
        if not 0.0 < self.layer_lr_decay <= 1.0:
            raise ValueError(f"train.layer_lr_decay must be in (0, 1], got {self.layer_lr_decay}")
        if self.keep_epochs < 0:
            raise ValueError(f"train.keep_epochs must be >= 0, got {self.keep_epochs}")


@dataclass(frozen=True)
class Config:
    """A whole run: data, model, training, and the folder its outputs go to."""

    data: DataConfig
    model: ModelOptions = field(default_factory=TransformerOptions)
    train: TrainConfig = field(default_factory=TrainConfig)
    seq2seq: Seq2SeqConfig = field(default_factory=Seq2SeqConfig)
    run_dir: Path = Path("runs/run")
