"""``selfattn train``, ``eval``, ``predict`` and ``attention``: thin layers over
the task pipeline (:mod:`selfattn.tasks`)."""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path
from typing import Any

from selfattn.api import load
from selfattn.cli.compile_flag import add_compile_argument, compiled, report_compiled
from selfattn.cli.exit_cmd import add_exit_arguments, exit_requested, run_exit_eval
from selfattn.cli.whisper_cmd import (
    add_whisper_arguments,
    refuse_whisper_arguments,
    run_whisper_attention,
    run_whisper_predict,
)
from selfattn.config import load_config
from selfattn.data.batching.lengths import unit
from selfattn.datatypes import Example
from selfattn.messages import plural
from selfattn.pretrained.whisper import is_whisper_checkpoint
from selfattn.tasks import Predictor, run
from selfattn.tasks.run import batches_per_epoch, prepare
from selfattn.tasks.scored_data import FORMATS, SPLITS
from selfattn.train import distributed
from selfattn.train.checkpoint import MANIFEST
from selfattn.train.loop import TrainingInterrupted, TrainResult
from selfattn.viz import plot_attention

INPUT_HELP = (
    "the text itself, or @FILE for one input per line of FILE. An argument that starts "
    "with @ but names no existing file is read as text (with a note on stderr); "
    "@@TEXT is always the text @TEXT"
)
TRUNCATE_HELP = (
    "an input longer than the model's max_len, where its positions end there (a learned "
    "table): keep its first max_len tokens, with a warning, instead of refusing it "
    "(models with unbounded positions read any length; a token task reads long inputs "
    "in overlapping windows)"
)


#: The fields a user reaches for first; every field is in selfattn.config's dataclasses.
TRAIN_FIELDS = """fields often set with --set (all: the dataclasses of selfattn.config):
  run_dir=runs/NAME          where checkpoints and metrics go (default: runs/<config name>)
  data.dataset=FILE          a recipe name or your own file; data.dev / data.test: more files
  data.dev_fraction=0.1      share of your training file held out as dev when no data.dev
  data.max_len=256           longest input; longer ones are refused (data.overlong="cut")
  train.epochs=N  train.seed=S  train.lr=X  data.batch_size=B
  train.threads=N            CPU threads (same as --threads)
  train.checkpoint_every=N   save RUN_DIR/last every N steps (default: every 120 s)
  train.device=cpu|cuda|auto
  model.architecture=transformer|conformer|graph|bigru|…   model.attention=dense|window|…
  model.score=dot|scaled_dot|additive   model.normalizer=softmax|relu|sigmoid
  model.include_self=false   model.share_weights=true   model.pooling=cls
  model.halting=act          adaptive depth (ACT) of a share_weights stack; model.ponder_weight
  model.pretrained=minilm-l6  fine-tune a BERT checkpoint (a name or a local folder)
  train.layer_lr_decay=0.9   train.freeze_encoder=true (a linear probe of the checkpoint)
  train.checkpoint_activations=true  recompute each block in backward (less memory)
  train.keep_epochs=N        keep RUN/epoch-E of the last N epochs for selfattn average
  train.distributed=ddp|fsdp under torchrun / --nproc: replicate or shard the model
  train.init_from=runs/NAME  start from a run's weights (fine-tuning)   train.max_steps=N
  train.max_minutes=M        stop within M minutes of training (last saved; --resume goes on)
  train.nan_policy=stop|skip a loss that is nan/inf: stop (last kept) or skip that step
  train.tensorboard=false    no TensorBoard events in RUN_DIR (written if tensorboard is installed)
  train.objective=mle|mrt|reinforce  seq2seq: sequence-level training on sampled outputs
                             (train.sequence_samples=K, train.mrt_alpha=A, train.mle_weight=W)
"""


def add_set_argument(parser: argparse.ArgumentParser, help_text: str) -> None:
    """``--set SECTION.FIELD=VALUE`` (repeatable) into ``args.overrides``."""
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="SECTION.FIELD=VALUE",
        help=help_text,
    )


def add_train_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``selfattn train``."""
    parser.add_argument("config", type=Path, help="a TOML file, e.g. configs/pos_wsj.toml")
    add_set_argument(parser, "override a config field (repeatable), e.g. --set train.epochs=5")
    parser.add_argument("--resume", action="store_true", help="continue from RUN_DIR/last")
    parser.add_argument(
        "--overwrite", action="store_true", help="start afresh even if RUN_DIR has a run"
    )
    parser.add_argument(
        "--no-progress",
        action="store_true",
        help="plain log lines instead of a progress bar (the default off a terminal)",
    )
    parser.add_argument(
        "--nproc",
        type=int,
        metavar="N",
        help="train on N processes of this machine (torchrun --standalone; each takes "
        "1/N of every batch of data.batch_size examples); for several machines run "
        "torchrun ... -m selfattn train yourself",
    )
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = TRAIN_FIELDS


def run_train(args: argparse.Namespace) -> int:
    """Train, then report the best epoch (and what chose it) and where the checkpoints are."""
    if getattr(args, "nproc", None) is not None:
        return launch_train(args)
    main_rank = distributed.world_from_env().rank == 0
    if not main_rank:  # under torchrun, rank 0 alone reports
        return run_quietly(args)
    config = load_config(args.config, args.overrides)
    began = time.time()
    try:
        result, prepared = run(
            config,
            resume=args.resume,
            overwrite=args.overwrite,
            progress=not args.no_progress,
            log=print,
        )
    except TrainingInterrupted:
        raise
    except KeyboardInterrupt:  # before the loop could save: say what became of the run
        raise interrupted_early(config.run_dir, resumable=args.resume, since=began) from None
    splits = prepared.splits
    print(
        f"{splits.name}: {len(splits.train)} train / {len(splits.dev)} dev / "
        f"{len(splits.test)} test examples; {plural(len(result.history), 'epoch')}"
        + (" (stopped early)" if result.stopped_early else "")
        + (" (stopped at train.max_minutes; --resume goes on)" if result.out_of_time else "")
    )
    summary = best_epoch_summary(result)
    if summary:
        print(summary)
    print(f"checkpoints: {result.run_dir / 'best'}  {result.run_dir / 'last'}")
    return 0


def interrupted_early(run_dir: Path, *, resumable: bool, since: float) -> KeyboardInterrupt:
    """What Ctrl-C says when it stops a run before the loop saved a checkpoint (while the
    data is read, the model built, the run folder claimed, or in the first steps): the
    checkpoint to go on from, when ``run_dir/last`` holds this run's (it was being
    ``resumable`` resumed, or this process saved it after ``since``), else that nothing
    was saved."""
    last = run_dir / "last"
    manifest = last / MANIFEST
    if manifest.is_file() and (resumable or manifest.stat().st_mtime >= since):
        return TrainingInterrupted(
            f"interrupted before training went on; the last checkpoint is in {last}", last
        )
    return KeyboardInterrupt("interrupted before the run saved a checkpoint; nothing to resume")


def run_quietly(args: argparse.Namespace) -> int:
    """A rank other than 0: train, print nothing."""
    config = load_config(args.config, args.overrides)
    run(config, resume=args.resume, overwrite=args.overwrite, progress=False)
    return 0


def launch_train(args: argparse.Namespace) -> int:
    """``--nproc N``: check that N processes can share the run's batches, then start
    ``selfattn train`` (the same arguments) on N processes with torchrun; its exit status.

    Raises:
        ValueError: N < 1, inside torchrun already, N not dividing ``data.batch_size`` or
            more than the batches of an epoch.
    """
    if distributed.inside_torchrun():
        raise ValueError("--nproc inside torchrun: torchrun already started the processes")
    config = load_config(args.config, args.overrides)
    distributed.check_world_size(args.nproc, config.data.batch_size)
    steps = batches_per_epoch(config, prepare(config))
    distributed.check_world_size(args.nproc, config.data.batch_size, steps)
    arguments = [str(args.config)]
    for override in args.overrides:
        arguments += ["--set", override]
    for flag in ("resume", "overwrite", "no_progress"):
        if getattr(args, flag):
            arguments.append("--" + flag.replace("_", "-"))
    return distributed.launch(args.nproc, arguments)


def best_epoch_summary(result: TrainResult) -> str | None:
    """``best epoch N: dev accuracy X`` — whichever metric chose the best epoch."""
    best = result.best
    if best is None:
        return None
    epoch = best["epoch"]
    for metric in ("set_f1", "accuracy", "rmse", "loss"):  # what the loop ranks by, or reports
        if f"dev_{metric}" in best:
            return f"best epoch {epoch}: dev {metric} {best[f'dev_{metric}']:.4f}"
    return f"best epoch {epoch} by training loss {best['train_loss']:.4f} (no dev set)"


def add_eval_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``selfattn eval``."""
    parser.add_argument("checkpoint", type=Path, help="a run folder or a checkpoint folder")
    scored = parser.add_mutually_exclusive_group()
    scored.add_argument(
        "--split",
        choices=SPLITS,
        help="the split of the run's dataset to score (default: test)",
    )
    scored.add_argument(
        "--data",
        type=Path,
        metavar="FILE",
        help="score a labelled file instead, in a format selfattn train reads for the run's "
        "task (word/TAG .txt, .conllu, label,text .csv/.tsv, .npz, .ts, .jsonl label sets; "
        "source<TAB>target lines for seq2seq), with the run's vocabularies and labels",
    )
    parser.add_argument(
        "--format",
        choices=FORMATS,
        help="with --data: read FILE as if its name ended in .FORMAT (default: its extension)",
    )
    parser.add_argument("--truncate", action="store_true", help=TRUNCATE_HELP)
    add_decoding_arguments(parser)
    add_compile_argument(parser)
    parser.add_argument(
        "--batch-size",
        type=int,
        metavar="N",
        help="seq2seq: sources decoded at once (default 64), faster on a GPU when larger; "
        "an output cut at the length cap (seq2seq.max_output_ratio × the batch's longest "
        "source + 10) may change with it",
    )
    add_exit_arguments(parser)


def add_decoding_arguments(parser: argparse.ArgumentParser) -> None:
    """How a seq2seq checkpoint decodes (other models refuse these options)."""
    group = parser.add_argument_group(
        "seq2seq decoding (default: the config's seq2seq.decoding; other models refuse these)"
    )
    choice = group.add_mutually_exclusive_group()
    choice.add_argument("--greedy", action="store_true", help="greedy decoding")
    choice.add_argument("--beam", type=int, metavar="K", help="beam search of width K (>= 1)")
    choice.add_argument("--sample", action="store_true", help="sample (see --temperature)")
    choice.add_argument("--nat", action="store_true", help="non-autoregressive decoding")
    group.add_argument("--temperature", type=float, help="sampling temperature (default 1)")
    group.add_argument("--top-k", type=int, help="sample among the k likeliest tokens")
    group.add_argument("--top-p", type=float, help="sample from the nucleus of mass p")
    group.add_argument("--length-scale", type=float, help="NAT: predicted length × this")
    group.add_argument(
        "--length-penalty",
        type=float,
        metavar="A",
        help="beam search: α of the length normalisation ((5 + |Y|) / 6)^α, 0 the plain sum "
        "(default: the config's seq2seq.length_penalty)",
    )
    group.add_argument("--seed", type=int, help="seed of --sample (default 0)")
    labels = parser.add_argument_group("multilabel models (others refuse it)")
    labels.add_argument(
        "--threshold",
        type=float,
        metavar="P",
        help="a label is in the predicted set when its probability is at least P (default 0.5)",
    )


def decoding_options(args: argparse.Namespace) -> dict[str, Any]:
    """The decoding options given on the command line (only those), as keyword
    arguments of the task's predict / score / attention.

    Raises:
        ValueError: an option that cannot mean anything (``--beam 0``).
    """
    if args.beam is not None and args.beam < 1:
        raise ValueError(f"--beam must be at least 1, got {args.beam}")
    alpha = args.length_penalty
    if alpha is not None and not (math.isfinite(alpha) and alpha >= 0):
        raise ValueError(f"--length-penalty must be a finite number >= 0, got {alpha}")
    batch_size = getattr(args, "batch_size", None)  # eval's alone
    if batch_size is not None and batch_size < 1:
        raise ValueError(f"--batch-size must be at least 1, got {batch_size}")
    options: dict[str, Any] = {}
    for flag in ("greedy", "sample", "nat"):
        if getattr(args, flag):
            options["method"] = flag
    if args.beam is not None:
        options.update(method="beam", beam_size=args.beam)
    names = ("temperature", "top_k", "top_p", "length_scale", "length_penalty", "seed")
    for name in (*names, "threshold", "batch_size"):
        if getattr(args, name, None) is not None:
            options[name] = getattr(args, name)
    return options


def run_eval(args: argparse.Namespace) -> int:
    """Print the checkpoint's metrics on a split, or on a labelled file (``--data``), as
    JSON (with early exit: :mod:`selfattn.cli.exit_cmd`)."""
    options = decoding_options(args)
    if args.format is not None and args.data is None:
        raise ValueError("--format says how to read the file of --data; give --data FILE")
    if args.data is None:
        args.split = args.split or "test"
    if exit_requested(args):
        if args.compile:
            raise ValueError("--compile: early-exit evaluation runs its model eager")
        return run_exit_eval(args, options)
    model = load(args.checkpoint)
    watch = compiled(model.predictor, args)
    scored: str | Path = args.split if args.data is None else args.data  # a Path: a file
    metrics = model.evaluate(scored, format=args.format, truncate=args.truncate, **options)
    report_compiled(watch, "eval")
    where = {"split": args.split} if args.data is None else {"data": str(args.data)}
    report = {**where, **metrics}
    if report.get("truncated"):
        warn(
            "eval",
            f"{int(report['truncated'])} {scored} examples longer than the model's "
            f"max_len = {model.predictor.max_len} were cut to it (--truncate)",
        )
    print(json.dumps(report))
    return 0


def warn(command: str, message: str) -> None:
    """One warning line on stderr."""
    print(f"selfattn {command}: warning: {message}", file=sys.stderr)


def _checkpoint_or_whisper(parser: argparse.ArgumentParser, whisper_use: str) -> None:
    """``checkpoint``, which may also be Whisper: ``whisper_use`` ends its help."""
    parser.add_argument(
        "checkpoint",
        type=Path,
        help="a run folder or a checkpoint folder; or whisper-base (or a Hugging Face "
        f"Whisper folder){whisper_use}",
    )


def add_predict_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``selfattn predict``."""
    _checkpoint_or_whisper(parser, " to transcribe a recording (over 30 s: with --chunk)")
    parser.add_argument("text", metavar="INPUT", help=INPUT_HELP)
    parser.add_argument("--truncate", action="store_true", help=TRUNCATE_HELP)
    add_decoding_arguments(parser)
    add_compile_argument(parser)
    add_whisper_arguments(parser)


def fitted(predictor: Predictor, example: Example, args: argparse.Namespace) -> Example:
    """``example`` as the model reads it; a warning on stderr when ``--truncate`` cut it."""
    fit = predictor.fit(example, truncate=args.truncate)
    if len(fit) != len(example):
        warn(
            args.command,
            f"{example.source}: input of {len(example)} {unit(example)} cut to the model's "
            f"max_len = {len(fit)} (--truncate)",
        )
    return fit


def run_predict(args: argparse.Namespace) -> int:
    """One line per input: tags per token (token task), the label with probabilities
    (sequence task), the value (regression) or the decoded output (seq2seq); a Whisper
    checkpoint (``whisper-base`` or a Hugging Face Whisper folder) prints the transcript
    of a recording."""
    options = decoding_options(args)
    if is_whisper_checkpoint(args.checkpoint):
        if args.compile:
            raise ValueError("--compile: a Whisper checkpoint runs eager")
        return run_whisper_predict(args, options)
    refuse_whisper_arguments(args)
    predictor = Predictor(args.checkpoint)
    watch = compiled(predictor, args)
    for example in predictor.read(args.text, command="predict"):
        print(predictor.predict(fitted(predictor, example, args), **options))
    report_compiled(watch, "predict")
    return 0


def add_attention_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``selfattn attention``."""
    _checkpoint_or_whisper(parser, ": its cross-attention over a recording")
    parser.add_argument(
        "text",
        metavar="INPUT",
        help='the input to look at, e.g. "I saw a saw" (text), or a file of the kind the '
        "model reads (an image, a WAV/FLAC recording, a graph as JSON, an .npz)",
    )
    parser.add_argument(
        "-o",
        "--output",
        type=Path,
        default=Path("attention.png"),
        help="the image to write; a seq2seq model writes its cross-attention there and its "
        "encoder's and decoder's self-attention beside it (FILE.encoder-self-attention.png …)",
    )
    parser.add_argument(
        "--stats",
        action="store_true",
        help="print every head's mean attention distance and entropy as JSON instead of "
        "drawing (small distance: a local head; small entropy: a focused one); layers and "
        "heads are counted from 0 there",
    )
    parser.add_argument("--truncate", action="store_true", help=TRUNCATE_HELP)
    add_decoding_arguments(parser)
    add_whisper_arguments(parser)


def run_attention(args: argparse.Namespace) -> int:
    """Write every layer's and head's attention maps for one input: one image per kind
    of attention the model has."""
    options = decoding_options(args)
    if is_whisper_checkpoint(args.checkpoint):
        return run_whisper_attention(args, options)
    refuse_whisper_arguments(args)
    predictor = Predictor(args.checkpoint)
    examples = predictor.read(args.text, command="attention")
    if len(examples) != 1:
        raise ValueError(f"{args.text}: {len(examples)} inputs; attention draws one at a time")
    example = fitted(predictor, examples[0], args)
    figures = predictor.attention(example, **options)
    if args.stats:
        from selfattn.explore.payload import PayloadBuilder

        builder = PayloadBuilder(predictor, options=options, title=str(args.checkpoint))
        print(json.dumps({"input": args.text, "figures": builder.statistics(figures)}, indent=1))
        return 0
    for index, figure in enumerate(figures):
        path = args.output
        if index:
            slug = figure.title.replace(" ", "-")
            path = args.output.with_name(f"{args.output.stem}.{slug}{args.output.suffix}")
        written = plot_attention(
            figure.maps,
            figure.queries,
            path,
            title=args.text,
            key_tokens=figure.keys,
            layer_name=figure.layer,
        )
        layers = plural(len(figure.maps), figure.layer)
        heads = plural(figure.maps[0].shape[0], "head")
        print(f"wrote {written}: {figure.title} ({layers} × {heads})")
    return 0
