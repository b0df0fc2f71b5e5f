"""``selfattn train``, ``eval``, ``predict`` and ``attention``: thin layers over
:mod:`selfattn.train.pipeline`."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from selfattn.data.lengths import unit
from selfattn.data.types import Example
from selfattn.messages import plural
from selfattn.train.config import load_config
from selfattn.train.loop import TrainResult
from selfattn.train.pipeline import Predictor, Seq2SeqPredictor, load_predictor, run
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


#: The fields a user reaches for first; every field is in selfattn.train.config's dataclasses.
TRAIN_FIELDS = """fields often set with --set (all: the dataclasses of selfattn.train.config):
  run_dir=runs/NAME          where checkpoints and metrics go (default: runs/<config name>)
  data.dataset=FILE          a recipe name or your own file; data.dev / data.test: more files
  data.dev_fraction=0.1      share of your training file held out as dev when no data.dev
  data.max_len=256           longest input; longer ones are refused (data.overlong="cut")
  train.epochs=N  train.seed=S  train.lr=X  data.batch_size=B
  train.threads=N            CPU threads (same as --threads)
  train.checkpoint_every=N   save RUN_DIR/last every N steps (default: every 120 s)
  train.device=cpu|cuda|auto
"""


def add_train_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``selfattn train``."""
    parser.add_argument("config", type=Path, help="a TOML file, e.g. configs/pos_wsj.toml")
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="SECTION.FIELD=VALUE",
        help="override a config field (repeatable), e.g. --set train.epochs=5",
    )
    parser.add_argument("--resume", action="store_true", help="continue from RUN_DIR/last")
    parser.add_argument(
        "--overwrite", action="store_true", help="start afresh even if RUN_DIR has a run"
    )
    parser.add_argument(
        "--no-progress",
        action="store_true",
        help="plain log lines instead of a progress bar (the default off a terminal)",
    )
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = TRAIN_FIELDS


def run_train(args: argparse.Namespace) -> int:
    """Train, then report the best epoch (and what chose it) and where the checkpoints are."""
    config = load_config(args.config, args.overrides)
    result, prepared = run(
        config,
        resume=args.resume,
        overwrite=args.overwrite,
        progress=not args.no_progress,
        log=print,
    )
    splits = prepared.splits
    print(
        f"{splits.name}: {len(splits.train)} train / {len(splits.dev)} dev / "
        f"{len(splits.test)} test examples; {plural(len(result.history), 'epoch')}"
        + (" (stopped early)" if result.stopped_early else "")
    )
    summary = best_epoch_summary(result)
    if summary:
        print(summary)
    print(f"checkpoints: {result.run_dir / 'best'}  {result.run_dir / 'last'}")
    return 0


def best_epoch_summary(result: TrainResult) -> str | None:
    """``best epoch N: dev accuracy X`` — whichever metric chose the best epoch."""
    best = result.best
    if best is None:
        return None
    epoch = best["epoch"]
    for metric in ("accuracy", "rmse", "loss"):  # what the loop ranks by, or reports
        if f"dev_{metric}" in best:
            return f"best epoch {epoch}: dev {metric} {best[f'dev_{metric}']:.4f}"
    return f"best epoch {epoch} by training loss {best['train_loss']:.4f} (no dev set)"


def add_eval_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``selfattn eval``."""
    parser.add_argument("checkpoint", type=Path, help="a run folder or a checkpoint folder")
    parser.add_argument(
        "--split",
        default="test",
        choices=("train", "dev", "test"),
        help="the split of the run's dataset to score (default: test)",
    )
    parser.add_argument("--truncate", action="store_true", help=TRUNCATE_HELP)
    add_decoding_arguments(parser)


def add_decoding_arguments(parser: argparse.ArgumentParser) -> None:
    """How a seq2seq checkpoint decodes (ignored by the other tasks)."""
    group = parser.add_argument_group("seq2seq decoding (default: the config's seq2seq.decoding)")
    choice = group.add_mutually_exclusive_group()
    choice.add_argument("--greedy", action="store_true", help="greedy decoding")
    choice.add_argument("--beam", type=int, metavar="K", help="beam search of width K (>= 1)")
    choice.add_argument("--sample", action="store_true", help="sample (see --temperature)")
    choice.add_argument("--nat", action="store_true", help="non-autoregressive decoding")
    group.add_argument("--temperature", type=float, default=1.0, help="sampling temperature")
    group.add_argument("--top-k", type=int, help="sample among the k likeliest tokens")
    group.add_argument("--top-p", type=float, help="sample from the nucleus of mass p")
    group.add_argument(
        "--length-scale", type=float, default=1.0, help="NAT: predicted length × this"
    )
    group.add_argument("--seed", type=int, default=0, help="seed of --sample")


def check_decoding_arguments(args: argparse.Namespace) -> None:
    """Refuse decoding options that cannot mean anything, before loading a checkpoint."""
    if args.beam is not None and args.beam < 1:
        raise ValueError(f"--beam must be at least 1, got {args.beam}")


def decoding_options(args: argparse.Namespace, predictor: Seq2SeqPredictor) -> dict[str, Any]:
    """``Seq2SeqPredictor.decode`` keyword arguments from the command line."""
    check_decoding_arguments(args)
    method = predictor.config.seq2seq.decoding
    if args.greedy:
        method = "greedy"
    elif args.beam is not None:
        method = "beam"
    elif args.sample:
        method = "sample"
    elif args.nat:
        method = "nat"
    return {
        "method": method,
        "beam_size": args.beam,
        "temperature": args.temperature,
        "top_k": args.top_k,
        "top_p": args.top_p,
        "length_scale": args.length_scale,
        "seed": args.seed,
    }


def run_eval(args: argparse.Namespace) -> int:
    """Print the checkpoint's metrics on a split as JSON."""
    check_decoding_arguments(args)
    predictor = load_predictor(args.checkpoint)
    if isinstance(predictor, Seq2SeqPredictor):
        options = decoding_options(args, predictor)
        metrics = predictor.evaluate(args.split, truncate=args.truncate, **options)
        report = {"split": args.split, "decoding": options["method"], **metrics}
    else:
        report = {"split": args.split, **predictor.evaluate(args.split, truncate=args.truncate)}
    if report.get("truncated"):
        warn(
            "eval",
            f"{int(report['truncated'])} {args.split} examples longer than the model's "
            f"max_len = {predictor.max_len} were cut to it (--truncate)",
        )
    print(json.dumps(report))
    return 0


def warn(command: str, message: str) -> None:
    """One warning line on stderr."""
    print(f"selfattn {command}: warning: {message}", file=sys.stderr)


def add_predict_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``selfattn predict``."""
    parser.add_argument("checkpoint", type=Path, help="a run folder or a checkpoint folder")
    parser.add_argument("text", help=f'e.g. "I saw a saw": {INPUT_HELP}')
    parser.add_argument("--truncate", action="store_true", help=TRUNCATE_HELP)
    add_decoding_arguments(parser)


def inputs(text: str, command: str = "predict") -> list[tuple[str, str]]:
    """``(source, line)`` pairs from the argument: the text itself, or the lines of @FILE.

    ``@PATH`` names a file when PATH is an existing file; otherwise the whole argument is
    the text (a note on stderr says so). ``@@…`` is always the text ``@…``.

    Raises:
        ValueError: @FILE holds no line that is not blank.
        FileNotFoundError: @FILE is a folder.
    """
    if text.startswith("@@"):
        return [("<argument>", text[1:])]
    if not text.startswith("@"):
        return [("<argument>", text)]
    path = Path(text[1:])
    if path.is_dir():
        raise FileNotFoundError(f"{path}: a folder, not a file of inputs")
    if not path.is_file():
        print(
            f"selfattn {command}: note: no file {str(path)!r}, so {text!r} is read as text "
            "(write @@ for a text that starts with @)",
            file=sys.stderr,
        )
        return [("<argument>", text)]
    lines = path.read_text(encoding="utf-8").splitlines()
    found = [(f"{path}:{number}", line) for number, line in enumerate(lines, 1) if line.strip()]
    if not found:
        raise ValueError(f"{path}: no input lines")
    return found


def fitted(
    predictor: Predictor | Seq2SeqPredictor,
    example: Example,
    args: argparse.Namespace,
    *,
    windows: bool = True,
) -> Example:
    """``example`` as the model reads it; a warning on stderr when ``--truncate`` cut it."""
    if isinstance(predictor, Seq2SeqPredictor):
        fit = predictor.fit(example, truncate=args.truncate)
    else:
        fit = predictor.fit(example, truncate=args.truncate, windows=windows)
    if len(fit) != len(example):
        warn(
            args.command,
            f"{example.source}: input of {len(example)} {unit(example)} cut to the model's "
            f"max_len = {len(fit)} (--truncate)",
        )
    return fit


def run_predict(args: argparse.Namespace) -> int:
    """Tags per token (token task), the label with probabilities (sequence task), or the
    decoded output (seq2seq)."""
    check_decoding_arguments(args)
    lines = inputs(args.text, "predict")
    loaded = load_predictor(args.checkpoint)
    if isinstance(loaded, Seq2SeqPredictor):
        options = decoding_options(args, loaded)
        method = options.pop("method")
        for source, line in lines:
            example = fitted(loaded, loaded.example(line, source), args)
            decoded = loaded.decode([example], method, **options)
            print(loaded.detokenize(decoded.tokens[0]))
        return 0
    predictor = loaded
    for source, line in lines:
        example = fitted(predictor, predictor.example(line, source), args)
        prediction = predictor.predict(example)
        if predictor.task == "token":
            print(" ".join(f"{token}/{tag}" for token, tag, _ in prediction))  # type: ignore[misc]
        else:
            ranked = ", ".join(f"{label} {p:.3f}" for label, p in prediction)  # type: ignore[misc]
            print(f"{prediction[0][0]}\t({ranked})")
    return 0


def add_attention_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``selfattn attention``."""
    parser.add_argument("checkpoint", type=Path, help="a run folder or a checkpoint folder")
    parser.add_argument("text", help='the sentence to look at, e.g. "I saw a saw"')
    parser.add_argument("-o", "--output", type=Path, default=Path("attention.png"))
    parser.add_argument("--truncate", action="store_true", help=TRUNCATE_HELP)


def run_attention(args: argparse.Namespace) -> int:
    """Write every layer's and head's attention map for the sentence as one image (for
    seq2seq: the decoder's cross-attention from its output to the source)."""
    loaded = load_predictor(args.checkpoint)
    if isinstance(loaded, Seq2SeqPredictor):
        fitted(loaded, loaded.example(args.text), args)  # refuses, or warns of the cut
        maps, source, output = loaded.cross_attention_maps(args.text, truncate=args.truncate)
        path = plot_attention(maps, output, args.output, title=args.text, key_tokens=source)
        layers = plural(len(maps), "decoder layer")
        print(f"wrote {path} ({layers} × {plural(maps[0].shape[0], 'head')})")
        return 0
    predictor = loaded
    example = fitted(predictor, predictor.example(args.text), args, windows=False)
    maps = predictor.attention_maps(example)
    path = plot_attention(maps, list(example.tokens or ()), args.output, title=args.text)
    print(f"wrote {path} ({plural(len(maps), 'layer')} × {plural(maps[0].shape[0], 'head')})")
    return 0
