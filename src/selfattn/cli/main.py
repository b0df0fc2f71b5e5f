"""The ``selfattn`` command: subcommands, each a thin layer over the library."""

from __future__ import annotations

import argparse
import os
import shlex
import sys
import warnings
from collections.abc import Callable, Sequence

from selfattn import __version__, runtime
from selfattn.cli import (
    average_cmd,
    bench_cmd,
    config_cmd,
    data_cmd,
    demo,
    explore_cmd,
    export_cmd,
    model_cmds,
    runs_cmd,
    sweep_cmd,
    toy,
)

# Commands that compute take --threads (bench's is on `bench attention`, beside its options).
THREADED = ("toy", "demo", "train", "eval", "predict", "attention", "explore", "export")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser for every subcommand."""
    parser = argparse.ArgumentParser(
        prog="selfattn", description="Self-attention models on any vector set."
    )
    parser.add_argument("--version", action="version", version=f"selfattn {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    toy_parser = commands.add_parser(
        "toy", help="train self-attention vs a per-vector MLP on a toy set-labeling task"
    )
    toy.add_arguments(toy_parser)
    runtime.add_threads_argument(toy_parser)
    toy_parser.set_defaults(run=toy.run)
    subcommands = (
        (
            "demo",
            "the main job: POS tagging on WSJ vs baselines",
            demo.add_arguments,
            demo.run_demo,
        ),
        ("data", "list or fetch the dataset recipes", data_cmd.add_arguments, data_cmd.run),
        (
            "bench",
            "benchmark the attention variants against dense attention",
            bench_cmd.add_arguments,
            bench_cmd.run,
        ),
        (
            "train",
            "train a model from a TOML config",
            model_cmds.add_train_arguments,
            model_cmds.run_train,
        ),
        (
            "eval",
            "evaluate a checkpoint on a split",
            model_cmds.add_eval_arguments,
            model_cmds.run_eval,
        ),
        (
            "predict",
            "label new input with a checkpoint",
            model_cmds.add_predict_arguments,
            model_cmds.run_predict,
        ),
        (
            "attention",
            "draw a checkpoint's attention maps for a sentence",
            model_cmds.add_attention_arguments,
            model_cmds.run_attention,
        ),
        (
            "explore",
            "an interactive page of a checkpoint's attention (a file, or served locally)",
            explore_cmd.add_arguments,
            explore_cmd.run,
        ),
        (
            "export",
            "export a trained model as ONNX, torch.export or a Hugging Face BERT folder",
            export_cmd.add_arguments,
            export_cmd.run,
        ),
        (
            "config",
            "the [model] fields an architecture reads, with defaults (or every architecture)",
            config_cmd.add_arguments,
            config_cmd.run,
        ),
        (
            "average",
            "average the weights of a run's last epoch checkpoints into one checkpoint",
            average_cmd.add_arguments,
            average_cmd.run,
        ),
        (
            "runs",
            "the runs under a folder in one table (--plot: learning curves)",
            runs_cmd.add_arguments,
            runs_cmd.run,
        ),
        (
            "sweep",
            "train every combination of config values × seeds, then mean ± std over seeds",
            sweep_cmd.add_arguments,
            sweep_cmd.run,
        ),
    )
    for name, help_text, add_arguments, run in subcommands:
        sub = commands.add_parser(name, help=help_text)
        add_arguments(sub)
        if name in THREADED:
            runtime.add_threads_argument(sub)
        sub.set_defaults(run=run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; a user's mistake, or an OS error on a path the user gave (a run folder
    that cannot be written, an export target, a data file), is one line on stderr and
    exit status 2, no traceback, and a warning one line too (``selfattn train: warning:
    …``, not Python's file, line number and source line); Ctrl-C is one line and exit
    status 130."""
    args = build_parser().parse_args(argv)
    previous = warnings.formatwarning
    warnings.formatwarning = _one_line_warning(args.command)
    try:
        if "threads" in vars(args):
            apply_threads(args)
        return int(args.run(args))
    except ValueError as error:
        print(f"selfattn {args.command}: error: {error}", file=sys.stderr)
        return 2
    except OSError as error:
        line = os_error_line(error)
        if line is None:  # no path of the user's in it: a bug to see whole
            raise
        print(f"selfattn {args.command}: error: {line}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as interrupt:
        # Ctrl-C: one line, no traceback. The training loop saves a checkpoint first and
        # says so in the exception's message (selfattn.train.loop.TrainingInterrupted).
        print(f"selfattn {args.command}: {str(interrupt) or 'interrupted'}", file=sys.stderr)
        if args.command == "train" and getattr(interrupt, "checkpoint", None) is not None:
            print(f"continue with: {resume_command(args)}", file=sys.stderr)
        return 130
    finally:
        warnings.formatwarning = previous


def os_error_line(error: OSError) -> str | None:
    """An OSError on a path as one line, ``PATH: reason`` (``PATH -> PATH2: reason`` for a
    rename or link); a FileNotFoundError raised with a message of its own, that message;
    ``None`` for an OSError that names no path."""
    if error.filename is not None:
        paths = str(error.filename)
        if error.filename2 is not None:
            paths += f" -> {error.filename2}"
        return f"{paths}: {error.strerror or error}"
    if isinstance(error, FileNotFoundError):
        return str(error)
    return None


def _one_line_warning(command: str) -> Callable[..., str]:
    """A ``warnings.formatwarning`` for ``command``: the message alone, after the command
    (a warning that is not a plain ``UserWarning`` names its category)."""

    def format_warning(
        message: Warning | str,
        category: type[Warning],
        filename: str,
        lineno: int,
        line: str | None = None,
    ) -> str:
        kind = "" if category is UserWarning else f" ({category.__name__})"
        return f"selfattn {command}: warning: {message}{kind}\n"

    return format_warning


def apply_threads(args: argparse.Namespace) -> None:
    """``--threads N``, or the default count (:func:`selfattn.runtime.default_threads`),
    before the command runs; for ``train``, N also overrides the config's ``train.threads``.
    """
    if args.threads is not None and args.threads < 1:
        raise ValueError(f"--threads must be >= 1, got {args.threads}")
    threads = args.threads
    processes = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))  # torchrun's, on this machine
    if threads is None and processes > 1:
        threads = max(1, runtime.default_threads() // processes)
    runtime.configure_threads(threads)
    if args.command == "train" and args.threads is not None:
        args.overrides.append(f"train.threads={args.threads}")


def resume_command(args: argparse.Namespace) -> str:
    """The ``selfattn train`` command line that resumes the interrupted run."""
    parts = ["selfattn", "train", shlex.quote(str(args.config))]
    for override in args.overrides:
        parts += ["--set", shlex.quote(override)]
    return " ".join([*parts, "--resume"])


if __name__ == "__main__":
    sys.exit(main())
