"""``selfattn explore``: the attention explorer page for a trained run, written to one
HTML file or served on 127.0.0.1 (:mod:`selfattn.explore`)."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from selfattn.cli.model_cmds import TRUNCATE_HELP, add_decoding_arguments, decoding_options
from selfattn.datatypes import Example
from selfattn.explore.payload import MAX_TOKENS, MAX_WEIGHTS, PayloadBuilder
from selfattn.tasks.predictor import Predictor


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``selfattn explore``."""
    parser.add_argument("checkpoint", type=Path, help="a run folder or a checkpoint folder")
    parser.add_argument(
        "inputs",
        metavar="INPUT",
        nargs="*",
        help="inputs to show: a text (or @FILE of lines), or files of the kind the model "
        "reads (images, WAV/FLAC, graph JSON, .npz)",
    )
    parser.add_argument(
        "-o",
        "--output",
        type=Path,
        default=Path("explore.html"),
        help="the page to write (one self-contained HTML file; default explore.html)",
    )
    parser.add_argument(
        "--serve",
        action="store_true",
        help="serve the page with an input box instead of writing it (Ctrl-C stops)",
    )
    parser.add_argument("--port", type=int, default=8000, help="--serve: port (default 8000)")
    parser.add_argument(
        "--host",
        default="127.0.0.1",
        help="--serve: address to bind (default 127.0.0.1, this machine only)",
    )
    parser.add_argument("--truncate", action="store_true", help=TRUNCATE_HELP)
    parser.add_argument(
        "--max-tokens",
        type=int,
        default=MAX_TOKENS,
        metavar="N",
        help="most positions (tokens, frames, nodes) of one input shown; a longer input is "
        "refused, or with --truncate shows its first N with a note: its maps grow with the "
        f"square of its length (default {MAX_TOKENS})",
    )
    parser.add_argument(
        "--max-weights",
        type=int,
        default=MAX_WEIGHTS,
        metavar="N",
        help="most attention weights in the page, or in one answer of --serve; more are "
        f"refused (default {MAX_WEIGHTS:,}, about 20 MB)",
    )
    add_decoding_arguments(parser)


def build_examples(
    predictor: Predictor, builder: PayloadBuilder, inputs: list[str]
) -> list[dict[str, Any]]:
    """The payload examples of the command line's inputs."""

    def labelled() -> Iterator[tuple[Example, str]]:
        for argument in inputs:
            for example in predictor.read(argument, command="explore"):
                text = predictor.input == "text" and example.tokens
                if text:
                    label = " ".join(example.tokens or ())
                else:  # a file by its name; graph JSON given inline by its start
                    label = Path(argument).name if Path(argument).is_file() else argument[:60]
                yield example, label

    return builder.examples(labelled())


def run(args: argparse.Namespace) -> int:
    """Write the page, or serve it until Ctrl-C."""
    from selfattn.explore.server import Explorer, serve

    if not args.inputs and not args.serve:
        raise ValueError("give at least one INPUT to show, or --serve to type them in the page")
    if args.serve and not 0 <= args.port <= 65535:
        raise ValueError(f"--port must be in 0…65535, got {args.port}")
    options = decoding_options(args)
    predictor = Predictor(args.checkpoint)
    title = args.checkpoint.resolve().name
    builder = PayloadBuilder(
        predictor,
        options=options,
        title=title,
        serve=args.serve,
        truncate=args.truncate,
        max_tokens=args.max_tokens,
        max_weights=args.max_weights,
    )
    examples = build_examples(predictor, builder, args.inputs)
    if not args.serve:
        from selfattn.explore.page import render_page

        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(render_page(builder.payload(examples)), encoding="utf-8")
        print(f"wrote {args.output}: {len(examples)} input(s); open it in a browser")
        return 0
    try:
        server = serve(Explorer(builder, examples), args.host, args.port)
    except OSError as error:
        reason = error.strerror or error
        raise ValueError(f"--port {args.port}: cannot listen on {args.host} ({reason})") from None
    host, port = args.host, server.server_address[1]
    print(f"serving the explorer of {title} at http://{host}:{port}/ (Ctrl-C stops)", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        print("stopped")
    finally:
        server.server_close()
    return 0
