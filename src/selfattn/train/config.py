"""A run's configuration: frozen dataclasses loaded from TOML, overridable field by field.

    run_dir = "runs/pos"          # optional; default runs/<config file name>
    [data]
    dataset = "pos-wsj"
    [model]
    architecture = "transformer"
    [train]
    epochs = 20

``--set section.field=value`` overrides a field; the value is read as a TOML literal
(``3``, ``0.5``, ``true``, ``"x"``) and, failing that, as a plain string. TOML has no
null, so an optional field is set to ``None`` with the string ``"none"``. Every key and
type is checked against the dataclasses, with errors that name the field.
"""

from __future__ import annotations

import contextlib
import dataclasses
import tomllib
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Literal, Union

from selfattn.tasks.config import ModelConfig
from selfattn.tasks.seq2seq_config import Seq2SeqConfig
from selfattn.train.sequence_fields import check_sequence_fields

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
            on the model's own outputs (:mod:`selfattn.pipeline.seq2seq.sequence_level`).
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
    model: ModelConfig = field(default_factory=ModelConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    seq2seq: Seq2SeqConfig = field(default_factory=Seq2SeqConfig)
    run_dir: Path = Path("runs/run")


SECTIONS: dict[str, type] = {
    "data": DataConfig,
    "model": ModelConfig,
    "train": TrainConfig,
    "seq2seq": Seq2SeqConfig,
}
_TOP_LEVEL = ("run_dir",)


def load_config(path: Path, overrides: list[str] | None = None) -> Config:
    """Read a TOML configuration and apply ``section.field=value`` overrides.

    Args:
        path: the TOML file. Without a top-level ``run_dir``, the run goes to
            ``runs/<file name without .toml>``.
        overrides: ``"section.field=value"`` strings (``"run_dir=path"`` for the folder).

    Raises:
        ValueError: one line: unreadable TOML (with the file's name, line and column),
            an unknown section or key (the message lists the valid ones), a value of the
            wrong type or out of range (naming the field, and the file or the ``--set``
            override it came from).
    """
    path = Path(path)
    try:
        values = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as error:  # its message ends "(at line L, column C)"
        raise ValueError(f"{path}: invalid TOML: {error}") from None
    except UnicodeDecodeError as error:
        raise ValueError(f"{path}: not UTF-8 text ({error.reason} at byte {error.start})") from None
    except OSError as error:
        raise ValueError(f"cannot read config {path}: {error.strerror}") from None
    values.setdefault("run_dir", str(Path("runs") / path.stem))
    for override in overrides or []:
        apply_override(values, override)
    try:
        return config_from_dict(values)
    except ValueError as error:
        # Say where the bad value was written: an override that names the field, else the file.
        for override in overrides or []:
            key = override.partition("=")[0].strip()
            if key and key in str(error):
                raise ValueError(f"{error} (from --set {override})") from None
        raise ValueError(f"{path}: {error}") from None


def apply_override(values: dict[str, Any], override: str) -> None:
    """Set ``section.field`` (or a top-level key) in the raw ``values`` to ``value``."""
    key, sep, raw = override.partition("=")
    if not sep:
        raise ValueError(f"override {override!r} is not of the form section.field=value")
    parts = key.strip().split(".")
    if len(parts) == 1 and parts[0] in _TOP_LEVEL:
        values[parts[0]] = parse_value(raw)
        return
    if len(parts) != 2:
        raise ValueError(
            f"override {override!r}: the key must be section.field (sections: "
            f"{', '.join(SECTIONS)}) or one of {', '.join(_TOP_LEVEL)}"
        )
    section, name = parts
    _check_section(section)
    table = values.setdefault(section, {})
    if not isinstance(table, dict):
        raise ValueError(f"[{section}] must be a table")
    table[name] = parse_value(raw)


def parse_value(raw: str) -> Any:
    """A TOML literal (``3``, ``0.5``, ``true``, ``"x"``, ``[1, 2]``), else the raw string."""
    raw = raw.strip()
    try:
        return tomllib.loads(f"value = {raw}")["value"]
    except tomllib.TOMLDecodeError:
        return raw


def config_from_dict(values: Mapping[str, Any]) -> Config:
    """Build and validate a :class:`Config` from nested plain values (TOML or JSON)."""
    unknown = sorted(set(values) - set(SECTIONS) - set(_TOP_LEVEL))
    if unknown:
        valid = ", ".join([*(f"[{name}]" for name in SECTIONS), *_TOP_LEVEL])
        raise ValueError(f"unknown config section(s) {', '.join(unknown)}; valid: {valid}")
    if "data" not in values:
        raise ValueError("config: the [data] section (with data.dataset) is required")
    sections = {name: _build_section(name, values.get(name, {})) for name in SECTIONS}
    run_dir = _coerce(values.get("run_dir", "runs/run"), Path, "run_dir")
    return Config(run_dir=run_dir, **sections)


def config_to_dict(config: Config) -> dict[str, Any]:
    """Nested plain values (JSON-ready); :func:`config_from_dict` inverts it."""
    out: dict[str, Any] = {name: dataclasses.asdict(getattr(config, name)) for name in SECTIONS}
    out["run_dir"] = str(config.run_dir)
    return out


def config_to_toml(config: Config) -> str:
    """The configuration as TOML text that :func:`load_config` reads back unchanged."""
    values = config_to_dict(config)
    lines = [f"run_dir = {_toml_literal(values.pop('run_dir'))}"]
    for section, table in values.items():
        lines += ["", f"[{section}]"]
        lines += [f"{key} = {_toml_literal(value)}" for key, value in table.items()]
    return "\n".join(lines) + "\n"


def _toml_literal(value: Any) -> str:
    if value is None:
        return '"none"'
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        escaped = value.replace("\\", "\\\\").replace('"', '\\"')
        return f'"{escaped}"'
    raise TypeError(f"cannot write {value!r} as TOML")


# ------------------------------------------------------------------------- validation


def _check_section(section: str) -> None:
    if section not in SECTIONS:
        raise ValueError(
            f"unknown config section {section!r}; valid sections: {', '.join(SECTIONS)}"
        )


def _build_section(section: str, table: Any) -> Any:
    cls = SECTIONS[section]
    if not isinstance(table, Mapping):
        raise ValueError(f"[{section}] must be a table, got {table!r}")
    hints = typing.get_type_hints(cls)
    names = [f.name for f in fields(cls)]
    unknown = sorted(set(table) - set(names))
    if unknown:
        raise ValueError(
            f"unknown key(s) {', '.join(f'{section}.{key}' for key in unknown)}; "
            f"valid keys of [{section}]: {', '.join(names)}"
        )
    required = [
        f.name
        for f in fields(cls)
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    ]
    missing = [name for name in required if name not in table]
    if missing:
        raise ValueError(f"missing required key(s): {', '.join(f'{section}.{m}' for m in missing)}")
    kwargs = {key: _coerce(value, hints[key], f"{section}.{key}") for key, value in table.items()}
    return cls(**kwargs)


def _coerce(value: Any, hint: Any, name: str) -> Any:
    """``value`` as type ``hint``, or a ValueError naming the field, the type and the value."""
    origin = typing.get_origin(hint)
    if origin is Union or origin is types.UnionType:
        options = typing.get_args(hint)
        if type(None) in options and (value is None or _is_none_word(value)):
            return None
        for option in (o for o in options if o is not type(None)):
            with contextlib.suppress(ValueError):
                return _coerce(value, option, name)
        raise ValueError(f"{name}: expected {_type_name(hint)}, got {value!r}")
    if origin is Literal:
        choices = typing.get_args(hint)
        if any(value == c and type(value) is type(c) for c in choices):
            return value
        raise ValueError(
            f"{name}: expected one of {', '.join(repr(c) for c in choices)}, got {value!r}"
        )
    if hint is bool:
        if isinstance(value, bool):
            return value
    elif hint is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    elif hint is float:
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
    elif hint is str:
        if isinstance(value, str):
            return value
    elif hint is Path:
        if isinstance(value, str | Path):
            return Path(value)
    else:  # pragma: no cover - a field type this module does not know
        raise TypeError(f"{name}: unsupported field type {hint!r}")
    raise ValueError(f"{name}: expected {_type_name(hint)}, got {value!r}")


def _is_none_word(value: Any) -> bool:
    return isinstance(value, str) and value.lower() == "none"


def _type_name(hint: Any) -> str:
    origin = typing.get_origin(hint)
    if origin is Union or origin is types.UnionType:
        return " or ".join(
            "none" if option is type(None) else _type_name(option)
            for option in typing.get_args(hint)
        )
    if origin is Literal:
        return "one of " + ", ".join(repr(c) for c in typing.get_args(hint))
    if hint is Path:
        return "path (str)"
    return getattr(hint, "__name__", str(hint))


__all__ = [
    "SECTIONS",
    "Config",
    "DataConfig",
    "DeviceName",
    "ModelConfig",
    "Schedule",
    "Seq2SeqConfig",
    "Strategy",
    "TrainConfig",
    "apply_override",
    "config_from_dict",
    "config_to_dict",
    "config_to_toml",
    "load_config",
    "parse_value",
]
