"""``selfattn train``, ``eval``, ``predict`` and ``attention``: thin layers over
:mod:`selfattn.train.pipeline`."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from selfattn.train.config import load_config
from selfattn.train.pipeline import Seq2SeqPredictor, load_predictor, run
from selfattn.viz import plot_attention


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
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bar")


def run_train(args: argparse.Namespace) -> int:
    """Train, then report the best dev epoch and where the checkpoints are."""
    config = load_config(args.config, args.overrides)
    result, prepared = run(
        config, resume=args.resume, overwrite=args.overwrite, progress=not args.no_progress
    )
    splits = prepared.splits
    print(
        f"{splits.name}: {len(splits.train)} train / {len(splits.dev)} dev / "
        f"{len(splits.test)} test examples; {len(result.history)} epochs"
        + (" (stopped early)" if result.stopped_early else "")
    )
    if result.best is not None:
        metric = "accuracy" if "dev_accuracy" in result.best else "rmse"  # regression: rmse
        print(f"best epoch {result.best['epoch']}: dev {metric} {result.best[f'dev_{metric}']:.4f}")
    print(f"checkpoints: {result.run_dir / 'best'}  {result.run_dir / 'last'}")
    return 0


def add_eval_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``selfattn eval``."""
    parser.add_argument("checkpoint", type=Path, help="a run folder or a checkpoint folder")
    parser.add_argument("--split", default="test", choices=("train", "dev", "test"))
    add_decoding_arguments(parser)


def add_decoding_arguments(parser: argparse.ArgumentParser) -> None:
    """How a seq2seq checkpoint decodes (ignored by the other tasks)."""
    group = parser.add_argument_group("seq2seq decoding (default: the config's seq2seq.decoding)")
    choice = group.add_mutually_exclusive_group()
    choice.add_argument("--greedy", action="store_true", help="greedy decoding")
    choice.add_argument("--beam", type=int, metavar="K", help="beam search of width K")
    choice.add_argument("--sample", action="store_true", help="sample (see --temperature)")
    choice.add_argument("--nat", action="store_true", help="non-autoregressive decoding")
    group.add_argument("--temperature", type=float, default=1.0, help="sampling temperature")
    group.add_argument("--top-k", type=int, help="sample among the k likeliest tokens")
    group.add_argument("--top-p", type=float, help="sample from the nucleus of mass p")
    group.add_argument(
        "--length-scale", type=float, default=1.0, help="NAT: predicted length × this"
    )
    group.add_argument("--seed", type=int, default=0, help="seed of --sample")


def decoding_options(args: argparse.Namespace, predictor: Seq2SeqPredictor) -> dict[str, Any]:
    """``Seq2SeqPredictor.decode`` keyword arguments from the command line."""
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
    predictor = load_predictor(args.checkpoint)
    if isinstance(predictor, Seq2SeqPredictor):
        options = decoding_options(args, predictor)
        metrics = predictor.evaluate(args.split, **options)
        print(json.dumps({"split": args.split, "decoding": options["method"], **metrics}))
        return 0
    print(json.dumps({"split": args.split, **predictor.evaluate(args.split)}))
    return 0


def add_predict_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``selfattn predict``."""
    parser.add_argument("checkpoint", type=Path, help="a run folder or a checkpoint folder")
    parser.add_argument("text", help='a sentence, e.g. "I saw a saw", or @FILE for one per line')
    add_decoding_arguments(parser)


def _inputs(text: str) -> list[tuple[str, str]]:
    """(source, line) pairs from the argument: the text itself, or the lines of @FILE."""
    if not text.startswith("@"):
        return [("<argument>", text)]
    path = Path(text[1:])
    if not path.is_file():
        raise FileNotFoundError(f"no such file: {path}")
    lines = path.read_text(encoding="utf-8").splitlines()
    return [(f"{path}:{number}", line) for number, line in enumerate(lines, 1) if line.strip()]


def run_predict(args: argparse.Namespace) -> int:
    """Tags per token (token task), the label with probabilities (sequence task), or the
    decoded output (seq2seq)."""
    loaded = load_predictor(args.checkpoint)
    if isinstance(loaded, Seq2SeqPredictor):
        options = decoding_options(args, loaded)
        for source, line in _inputs(args.text):
            print(loaded.translate(line, origin=source, **options))
        return 0
    predictor = loaded
    for source, line in _inputs(args.text):
        prediction = predictor.predict(predictor.example(line, source))
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


def run_attention(args: argparse.Namespace) -> int:
    """Write every layer's and head's attention map for the sentence as one image (for
    seq2seq: the decoder's cross-attention from its output to the source)."""
    loaded = load_predictor(args.checkpoint)
    if isinstance(loaded, Seq2SeqPredictor):
        maps, source, output = loaded.cross_attention_maps(args.text)
        path = plot_attention(maps, output, args.output, title=args.text, key_tokens=source)
        print(f"wrote {path} ({len(maps)} decoder layers × {maps[0].shape[0]} heads)")
        return 0
    predictor = loaded
    example = predictor.example(args.text)
    maps = predictor.attention_maps(example)
    path = plot_attention(maps, list(example.tokens or ()), args.output, title=args.text)
    print(f"wrote {path} ({len(maps)} layers × {maps[0].shape[0]} heads)")
    return 0
