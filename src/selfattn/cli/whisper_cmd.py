"""``selfattn predict whisper-base recording.wav``: a Whisper checkpoint transcribes a
recording, decoded greedily, by beam search (``--beam K``) or by sampling (``--sample``
with ``--temperature``, ``--top-k``, ``--top-p``, ``--seed``), through selfattn's own
decoders (:mod:`selfattn.decoding.whisper`); ``--chunk`` reads a recording longer than
30 s window by window, ``--encoder-seconds S`` reads S seconds instead of Whisper's 30,
``--encoder-window W`` with truncated self-attention in the encoder. ``selfattn attention
whisper-base recording.wav`` draws the decoder's cross-attention over the recording: the
alignment picture."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from selfattn.decoding.whisper import whisper_search
from selfattn.pretrained.transcribe import SearchFn, Transcriber
from selfattn.pretrained.whisper_attention import cross_attention
from selfattn.viz import plot_attention

#: The decoding options a Whisper checkpoint reads (the others are the task models').
_READ = {"method", "beam_size", "length_penalty", "temperature", "top_k", "top_p", "seed"}


def add_whisper_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of a Whisper checkpoint (other checkpoints refuse them)."""
    group = parser.add_argument_group("Whisper checkpoints (others refuse these)")
    group.add_argument(
        "--chunk",
        action="store_true",
        help="transcribe a recording longer than 30 s in 30 s windows cut at quiet moments "
        "(default: refuse it)",
    )
    group.add_argument(
        "--encoder-seconds",
        type=float,
        metavar="S",
        help="the encoder reads S seconds (the recording padded to it) instead of Whisper's "
        "30: faster; 15 kept whisper-base's word error rate on the test recordings, the "
        "recording's own length makes it repeat itself",
    )
    group.add_argument(
        "--encoder-window",
        type=int,
        metavar="W",
        help="truncated self-attention in the encoder: each position reads the W positions "
        "(20 ms each) on either side only",
    )


def refuse_whisper_arguments(args: argparse.Namespace) -> None:
    """Refuse a Whisper option given for another checkpoint.

    Raises:
        ValueError: one line naming the option.
    """
    for name in ("chunk", "encoder_seconds", "encoder_window"):
        value = getattr(args, name, None)
        if value is not None and value is not False:  # 0 is a value given
            flag = "--" + name.replace("_", "-")
            raise ValueError(f"{args.checkpoint}: {flag} applies to Whisper checkpoints only")


def whisper_searcher(options: dict[str, Any]) -> SearchFn:
    """The search the command line's decoding ``options`` ask for.

    Raises:
        ValueError: an option Whisper does not read (``--nat``, ``--length-scale``,
            ``--threshold``), or a bad value (one line).
    """
    unread = sorted(set(options) - _READ)
    method = options.get("method", "greedy")
    if method == "nat" or unread:
        name = "--nat" if method == "nat" else "--" + unread[0].replace("_", "-")
        raise ValueError(
            f"{name} does not apply to a Whisper checkpoint (it reads --greedy, --beam, "
            "--length-penalty, --sample, --temperature, --top-k, --top-p and --seed)"
        )
    if "length_penalty" in options and method != "beam":
        raise ValueError(f"--length-penalty applies to beam search, not {method} decoding")
    sampling = {"temperature", "top_k", "top_p", "seed"} & set(options)
    if sampling and method != "sample":
        name = "--" + sorted(sampling)[0].replace("_", "-")
        raise ValueError(f"{name} needs --sample")
    return whisper_search(
        method,
        beam_size=options.get("beam_size", 5),
        length_penalty=options.get("length_penalty", 1.0),
        temperature=options.get("temperature", 1.0),
        top_k=options.get("top_k"),
        top_p=options.get("top_p"),
        seed=options.get("seed", 0),
    )


def _transcriber(args: argparse.Namespace, options: dict[str, Any]) -> Transcriber:
    """The transcriber the command line asks for."""
    if args.truncate:
        raise ValueError(f"{args.checkpoint}: --truncate does not apply to a Whisper checkpoint")
    return Transcriber(
        args.checkpoint,
        search=whisper_searcher(options),
        chunk=args.chunk,
        encoder_window=args.encoder_window,
        encoder_seconds=args.encoder_seconds,
    )


def run_whisper_predict(args: argparse.Namespace, options: dict[str, Any]) -> int:
    """Print the transcript of ``args.text``, a recording."""
    print(_transcriber(args, options)(args.text))
    return 0


def run_whisper_attention(args: argparse.Namespace, options: dict[str, Any]) -> int:
    """Draw every decoder layer's cross-attention (tokens × the recording's encoder
    positions, 20 ms each) for ``args.text``, a recording, into ``args.output``."""
    if args.stats or args.chunk:
        flag = "--stats" if args.stats else "--chunk"
        raise ValueError(f"{args.checkpoint}: {flag} does not apply to a Whisper checkpoint")
    alignment = cross_attention(_transcriber(args, options), args.text)
    seconds = alignment.positions * alignment.seconds_per_position
    keys = [f"{i * alignment.seconds_per_position:.2f} s" for i in range(alignment.positions)]
    written = plot_attention(
        alignment.recording_maps(),
        alignment.tokens,
        args.output,
        title=f"{Path(args.text).name}: {alignment.text!r}; keys: {seconds:.2f} s of audio, "
        "20 ms each",
        key_tokens=keys,
        layer_name="decoder layer",
    )
    layers, heads = len(alignment.maps), alignment.maps[0].shape[0]
    print(f"wrote {written}: cross-attention ({layers} decoder layers × {heads} heads)")
    return 0
