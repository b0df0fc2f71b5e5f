"""The sections of a run's configuration as frozen dataclasses: ``[data]``, ``[train]``
(here), ``[model]`` (its architecture's options,
:func:`~selfattn.models.registry.model_options`) and ``[seq2seq]``
(:mod:`selfattn.models.seq2seq_options`), and the whole :class:`Config`."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from selfattn.config.sequence_fields import check_sequence_fields
from selfattn.messages import check_range
from selfattn.models.architectures.transformer import TransformerOptions
from selfattn.models.option_groups import ModelOptions
from selfattn.models.seq2seq_options import Seq2SeqConfig

Schedule = Literal["linear", "cosine", "constant"]
DeviceName = Literal["cpu", "cuda", "auto"]
Overlong = Literal["refuse", "cut"]
Strategy = Literal["ddp", "fsdp"]
ObjectiveName = Literal["mle", "mrt", "reinforce"]
CandidatesName = Literal["sample", "beam", "both"]
CostName = Literal["auto", "bleu", "token_error"]
NanPolicy = Literal["stop", "skip"]
FusedSetting = Literal["auto", "on", "off"]

#: The highest ``train.lr``: AdamW moves every weight by about ``lr`` per step, so a rate
#: above 1 is already a mistake; the bound only keeps typos such as ``1e4`` out.
MAX_LR = 10.0
#: The longest ``data.max_len``: positional tables are sized by it, and a million
#: positions is past any shipped task (LRA's longest is 16K).
MAX_LEN = 2**20
#: The architectures ``train.compile`` (and ``--compile``) refuses, and why (each was
#: tried; the others train compiled with a bounded number of graphs).
NOT_COMPILED: dict[str, str] = {
    "lstm": "torch.compile leaves PyTorch's nn.LSTM eager, which is all of this model "
    "(nothing to compile)",
    "ntm": "its controller reads and writes the memory one step at a time in a Python "
    "loop, so every sequence length unrolls into a graph of its own",
    "rnn": "torch.compile leaves PyTorch's recurrent layers (its encoder and decoder) "
    "eager, and input feeding steps through the target in a Python loop",
}


def check_compiles(architecture: str, asked: str = "train.compile = true") -> None:
    """Refuse an architecture of :data:`NOT_COMPILED` in one line naming ``asked`` (the
    field or flag that asked for compiling) and why."""
    why = NOT_COMPILED.get(architecture)
    if why is not None:
        raise ValueError(f"{asked}: architecture {architecture!r} does not compile: {why}")


@dataclass(frozen=True)
class DataConfig:
    """Where the data come from and how they are turned into batches.

    Attributes:
        dataset: a recipe name (``"pos-wsj"``) or the path of a training file.
        dev: path of a development file (default: the recipe's dev split).
        test: path of a test file (default: the recipe's test split).
        batch_size: examples per batch.
        max_len: the longest sequence the model is built for (it sizes positional tables and
            is stored as the checkpoint's ``max_len``), at most :data:`MAX_LEN`. A longer
            example in any split is refused when the data are loaded, before training, or
            cut (``overlong``).
        lowercase: lowercase text before building the vocabulary.
        min_freq: words seen fewer times in training become the unknown word.
        bpe_vocab_size: split words into this many byte-pair units; ``None``: whole words.
            For seq2seq text, one subword vocabulary is learned on both sides.
        task: the task type: ``auto`` (a recipe knows its task; a user's file is read by
            its extension) or the name of a registered one (:data:`selfattn.tasks.TASKS`,
            checked before any data is read), such as ``seq2seq`` (a user's file holds
            ``source<TAB>target`` lines; on a dataset of label sets, the set written as a
            sequence) or ``regression`` (a user's file holds one number per example as
            its label).
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
    task: str = "auto"
    train_fraction: float = 1.0
    dev_fraction: float = 0.1
    overlong: Overlong = "refuse"

    def __post_init__(self) -> None:
        for name in ("batch_size", "min_freq"):
            check_range(f"data.{name}", getattr(self, name), at_least=1)
        check_range("data.max_len", self.max_len, at_least=1, at_most=MAX_LEN)
        check_range("data.train_fraction", self.train_fraction, above=0, at_most=1)
        check_range("data.dev_fraction", self.dev_fraction, at_least=0, below=1)
        check_range("data.bpe_vocab_size", self.bpe_vocab_size, at_least=1, none=True)


@dataclass(frozen=True)
class TrainConfig:
    """How to optimise.

    Attributes:
        epochs: passes over the training data (at most; see ``patience``).
        lr: peak learning rate of AdamW, in (0, :data:`MAX_LR`].
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
        nan_policy: what a training step whose loss is nan or ±inf gets: ``stop`` ends
            the run in one line naming the epoch and step (exit status 2; ``last`` keeps
            the latest checkpoint, from before that step, and ``--resume`` goes on from
            it); ``skip`` skips that step's update (it still counts as a step of the
            schedule), counts the skipped steps in each epoch's line
            (``skipped_steps``) and stops after
            :data:`~selfattn.train.nan_guard.SKIPS_IN_A_ROW` (10) in a row. ``skip``
            reads each step's loss before its update, which on a GPU waits for the step.
            Either way a dev loss or weights that are not finite stop the run and are
            never saved.
        tensorboard: also write TensorBoard event files into ``run_dir`` (each epoch's
            metrics line as scalars, attention images; :mod:`selfattn.train.tensorboard`)
            when the ``tensorboard`` package is installed; ``metrics.jsonl`` is written
            either way.
        tensorboard_images: draw the attention maps of one fixed dev example into the
            TensorBoard events every this many epochs; ``0``: never.
        fused_cross_entropy: compute a seq2seq decoder's vocabulary projection and its
            cross-entropy together, in chunks of rows, so that training never holds the
            (target tokens × vocabulary) logits (:mod:`selfattn.train.fused_ce`; the
            same loss and gradients): ``on``, ``off``, or ``auto`` (on for a vocabulary
            of at least :data:`~selfattn.train.fused_ce.AUTO_MIN_VOCAB` ids). Only the
            vocabulary output's loss is a cross-entropy of one projection's logits:
            ``on`` is refused for the pointer and copy outputs and for other task types.
        compile: train the model compiled by ``torch.compile`` (Inductor's fused kernels;
            :mod:`selfattn.train.compile`): its forward and backward, with dynamic batch
            size and length so that new lengths do not recompile. The first steps wait
            for the compiler (the console says how long). Checkpoints are those of an
            eager run. An architecture that does not compile (:data:`NOT_COMPILED`) is
            refused when the configuration is read.
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
    nan_policy: NanPolicy = "stop"
    tensorboard: bool = True
    tensorboard_images: int = 1
    fused_cross_entropy: FusedSetting = "auto"
    compile: bool = False

    def __post_init__(self) -> None:
        check_sequence_fields(self)
        check_range("train.epochs", self.epochs, at_least=1)
        check_range("train.lr", self.lr, above=0, at_most=MAX_LR)
        check_range("train.weight_decay", self.weight_decay, at_least=0)
        check_range("train.warmup_steps", self.warmup_steps, at_least=0)
        check_range("train.label_smoothing", self.label_smoothing, at_least=0, below=1)
        check_range("train.grad_clip", self.grad_clip, above=0, none=True)
        check_range("train.layer_lr_decay", self.layer_lr_decay, above=0, at_most=1)
        check_range("train.distributed_timeout", self.distributed_timeout, above=0)
        check_range("train.max_minutes", self.max_minutes, above=0, none=True)
        for name in ("max_steps", "checkpoint_every", "threads", "patience"):
            check_range(f"train.{name}", getattr(self, name), at_least=1, none=True)
        check_range("train.keep_epochs", self.keep_epochs, at_least=0)
        check_range("train.tensorboard_images", self.tensorboard_images, at_least=0)


@dataclass(frozen=True)
class Config:
    """A whole run: data, model, training, and the folder its outputs go to."""

    data: DataConfig
    model: ModelOptions = field(default_factory=TransformerOptions)
    train: TrainConfig = field(default_factory=TrainConfig)
    seq2seq: Seq2SeqConfig = field(default_factory=Seq2SeqConfig)
    run_dir: Path = Path("runs/run")

    def __post_init__(self) -> None:
        if self.train.compile:
            check_compiles(self.model.architecture)
