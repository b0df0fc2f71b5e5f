"""``selfattn predict whisper-base recording.wav``: a Whisper checkpoint transcribes a
recording, decoded greedily, by beam search (``--beam K``) or by sampling (``--sample``
with ``--temperature``, ``--top-k``, ``--top-p``, ``--seed``), through selfattn's own
decoders (:mod:`selfattn.decoding.whisper`); ``--chunk`` reads a recording longer than
30 s window by window, ``--encoder-seconds S`` reads S seconds instead of Whisper's 30,
``--encoder-window W`` with truncated self-attention in the encoder;
``--temperature-fallback`` decodes a window again by sampling at higher temperatures while
its transcript loops or is unsure (Whisper's safeguards). ``selfattn attention
whisper-base recording.wav`` draws the decoder's cross-attention over the recording: the
alignment picture."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from selfattn.decoding.whisper import fallback_searches, whisper_search
from selfattn.pretrained.fallback import DecodingChecks, check_threshold, fallback_temperatures
from selfattn.pretrained.transcribe import SearchFn, Transcriber
from selfattn.pretrained.whisper_attention import cross_attention
from selfattn.viz import plot_attention

#: The decoding options a Whisper checkpoint reads (the others are the task models').
_READ = {"method", "beam_size", "length_penalty", "temperature", "top_k", "top_p", "seed"}
#: The temperature fallback's options, and the checks' thresholds (the no-speech rule's too).
_FALLBACK = ("temperature_fallback", "fallback_step", "best_of")
_CHECKS = {
    "compression_ratio_threshold": "compression_ratio",
    "logprob_threshold": "log_prob",
    "no_speech_threshold": "no_speech",
}


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
    group.add_argument(
        "--temperature-fallback",
        action="store_true",
        help="Whisper's safeguard: decode at temperature 0 (greedy or --beam) and, while the "
        "transcript loops (compression ratio over R) or is unsure (mean log-probability under "
        "L), again by sampling at 0.2, 0.4, ... 1.0; the first that passes is kept (default: "
        "off, one decoding per window)",
    )
    group.add_argument(
        "--fallback-step",
        type=float,
        metavar="STEP",
        help="the fallback's temperatures: STEP, 2 STEP, ... up to 1 (default 0.2; in (0, 1])",
    )
    group.add_argument(
        "--best-of",
        type=int,
        metavar="N",
        help="the fallback keeps the best of N samples at each temperature (default 5)",
    )
    group.add_argument(
        "--compression-ratio-threshold",
        type=float,
        metavar="R",
        help="the fallback's loop check: zlib compression ratio of the text (default 2.4; > 0)",
    )
    group.add_argument(
        "--logprob-threshold",
        type=float,
        metavar="L",
        help="mean log-probability under which a transcript is unsure: the fallback's check "
        "and, with --no-speech-threshold, the no-speech rule's (default -1; <= 0)",
    )
    group.add_argument(
        "--no-speech-threshold",
        type=float,
        metavar="P",
        help="a window with p(<|nocaptions|>) over P and a mean log-probability under L is "
        "silence: empty transcript, no fallback (default 0.6; in [0, 1])",
    )


def refuse_whisper_arguments(args: argparse.Namespace) -> None:
    """Refuse a Whisper option given for another checkpoint.

    Raises:
        ValueError: one line naming the option.
    """
    for name in ("chunk", "encoder_seconds", "encoder_window", *_FALLBACK, *_CHECKS):
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


def fallback_options(
    args: argparse.Namespace, options: dict[str, Any]
) -> tuple[list[tuple[float, SearchFn]], DecodingChecks]:
    """The temperature fallback's searches (none without ``--temperature-fallback``) and
    the checks' thresholds the command line asks for.

    Raises:
        ValueError: a fallback option without ``--temperature-fallback``, the fallback with
            ``--sample``, or a value out of its range (one line naming the flag).
    """
    flags = {name: "--" + name.replace("_", "-") for name in (*_FALLBACK, *_CHECKS)}
    if not args.temperature_fallback:
        for name in ("fallback_step", "best_of", "compression_ratio_threshold"):
            if getattr(args, name) is not None:
                raise ValueError(f"{flags[name]} needs --temperature-fallback")
    elif options.get("method") == "sample":
        raise ValueError(
            "--temperature-fallback starts at temperature 0 (greedy or --beam) and samples "
            "only to retry; it does not combine with --sample"
        )
    given = {_CHECKS[n]: getattr(args, n) for n in _CHECKS if getattr(args, n) is not None}
    for name, field in _CHECKS.items():
        if field in given:
            check_threshold(field, given[field], name=flags[name])
    if not args.temperature_fallback:
        return [], DecodingChecks(**given)
    if args.best_of is not None and args.best_of < 1:
        raise ValueError(f"--best-of must be at least 1, got {args.best_of}")
    step = 0.2 if args.fallback_step is None else args.fallback_step
    fallback_temperatures(step, name="--fallback-step")
    best_of = 5 if args.best_of is None else args.best_of
    fallback = fallback_searches(step, best_of=best_of, seed=options.get("seed", 0))
    return fallback, DecodingChecks(**given)


def _transcriber(args: argparse.Namespace, options: dict[str, Any]) -> Transcriber:
    """The transcriber the command line asks for."""
    if args.truncate:
        raise ValueError(f"{args.checkpoint}: --truncate does not apply to a Whisper checkpoint")
    fallback, checks = fallback_options(args, options)
    if fallback:  # --seed seeds the fallback's sampling
        options = {name: value for name, value in options.items() if name != "seed"}
    return Transcriber(
        args.checkpoint,
        search=whisper_searcher(options),
        chunk=args.chunk,
        encoder_window=args.encoder_window,
        encoder_seconds=args.encoder_seconds,
        fallback=fallback,
        checks=checks,
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
