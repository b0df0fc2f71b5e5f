"""Word error rate of whisper-base without fine-tuning on the real recordings of Debian's
pocketsphinx-testdata: ours (selfattn's blocks, greedy with the KV cache) beside
transformers' ``WhisperForConditionalGeneration.generate`` (greedy) on the same weights,
with the seconds per recording of each at the thread count given.

Recordings: the five LibriVox excerpts (``librivox/``, 3–7 s, read English prose) and the
five ``cards/`` ones (1–3.5 s, playing cards named in isolation). Both sides read Whisper's
30 s window (the recording zero-padded). More columns of ours, each with the seconds per
recording:

* ``--trim``: the encoder reads only the recording's frames rounded up to whole seconds;
* ``--own-frames``: only the recording's own frames (⌊N / 160⌋, no padding at all);
* ``--pad 10,20``: the recording zero-padded to that many seconds instead of 30;
* ``--windows 256,128,64,32``: truncated self-attention in the encoder, each position
  reading that many positions (20 ms each) on either side (``--encoder-window``);
* ``--beam K``: beam search of width K (GNMT length penalty α = 1).

Words are compared as :func:`selfattn.pretrained.transcribe.transcript_words` writes them
(lower case, no punctuation, hyphens split, ``Mr.`` → mister, numbers up to 20 spelled).

The last line is the table once more as one JSON object (each column's ``wer-librivox``,
``wer-cards``, ``wer-all`` and ``seconds``; the 1-minute load average at the start and the
end), which ``tests/docs/records.py record`` reads.

Usage::

    python benchmarks/whisper_wer.py --threads 1
    python benchmarks/whisper_wer.py --threads 1 --trim --own-frames --pad 10,20
    python benchmarks/whisper_wer.py --threads 1 --no-hf --corpus librivox --windows 256,64,16
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from selfattn.data.readers.audio import read_wav
from selfattn.decoding.whisper import whisper_search
from selfattn.pretrained.recordings import recordings as pocketsphinx_recordings
from selfattn.pretrained.transcribe import (
    Transcriber,
    greedy_search,
    greedy_tokens,
    word_error_rate,
)
from selfattn.speech.whisper_mel import WHISPER_SAMPLE_RATE, whisper_log_mel


def recordings() -> list[tuple[str, Path, str]]:
    """``(set, WAV file, reference)`` for every recording, fetched on first use."""
    return [(r.corpus, r.path, r.reference) for r in pocketsphinx_recordings()]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="whisper-base", help="a name or a Whisper folder")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--no-hf", action="store_true", help="ours only (no transformers)")
    parser.add_argument("--trim", action="store_true", help="also: frames rounded to 1 s")
    parser.add_argument("--own-frames", action="store_true", help="also: the recording's frames")
    parser.add_argument("--pad", default="", help="also: padded to these seconds, e.g. 10,20")
    parser.add_argument("--windows", default="", help="also: these encoder windows, e.g. 64,32")
    parser.add_argument("--beam", type=int, help="also: beam search of this width")
    parser.add_argument("--corpus", choices=("librivox", "cards", "all"), default="all")
    return parser.parse_args(argv)


@torch.no_grad()
def hf_greedy(model: Any, samples: np.ndarray, eot_id: int) -> list[int]:
    """transformers' greedy ``generate`` on the 30 s window: the transcript's ids."""
    ids = model.generate(
        whisper_log_mel(samples).unsqueeze(0),
        language="en",
        task="transcribe",
        do_sample=False,
        num_beams=1,
    )[0].tolist()
    return [i for i in ids if i < eot_id]


def fewer_frames(transcriber: Transcriber, samples: np.ndarray, seconds: float | None) -> str:
    """The transcript when the encoder reads ``seconds`` (the recording padded with zeros
    to that, rounded up to whole seconds when 0) or, with ``None``, the recording's own
    frames (no padding at all) instead of the 30 s window."""
    if seconds is None:
        features = whisper_log_mel(samples, num_samples=None)
        features = features[:, : features.shape[1] // 2 * 2]
    else:
        rate = WHISPER_SAMPLE_RATE
        length = max(-(-samples.shape[0] // rate) * rate, int(seconds * rate))
        features = whisper_log_mel(samples, num_samples=length)
    decoded = greedy_tokens(transcriber.model, features, transcriber.prefix)
    return transcriber.tokenizer.decode(decoded.ids)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    load_before = os.getloadavg()[0]
    ours = Transcriber(args.model)
    theirs = None
    if not args.no_hf:
        import transformers

        folder = Path(ours.folder)
        model = transformers.WhisperForConditionalGeneration.from_pretrained(folder)
        theirs = model.eval()
    # Each column of ours: its label and how to set the transcriber up for it.
    columns: list[tuple[str, dict[str, Any]]] = [("ours (30 s window)", {})]
    if args.trim:
        columns.append(("ours, frames rounded up to 1 s", {"pad": 0.0}))
    if args.own_frames:
        columns.append(("ours, the recording's frames", {"pad": None}))
    for seconds in (float(s) for s in args.pad.split(",") if s):
        columns.append((f"ours, padded to {seconds:g} s", {"pad": seconds}))
    for window in (int(w) for w in args.windows.split(",") if w):
        columns.append((f"ours --encoder-window {window}", {"window": window}))
    if args.beam:
        columns.append((f"ours --beam {args.beam}", {"beam": args.beam}))
    labels = [label for label, _ in columns] + (["transformers generate"] if theirs else [])
    keys = dict(zip(labels, [column_key(setup) for _, setup in columns] + ["hf"], strict=False))
    rows: dict[str, list[str]] = {label: [] for label in labels}
    seconds = dict.fromkeys(labels, 0.0)
    references: list[str] = []
    same = 0
    data = [row for row in recordings() if args.corpus in ("all", row[0])]
    for corpus, wav, reference in data:
        samples, _ = read_wav(wav, sample_rate=16000)
        references.append(reference)
        print(f"{corpus} {wav.stem}  {len(samples) / 16000:.2f} s")
        print(f"  reference: {reference}")
        for label, setup in columns:
            ours.model.encoder.use_window(setup.get("window"))
            beam = setup.get("beam")
            ours.search = whisper_search("beam", beam_size=beam) if beam else greedy_search
            start = time.perf_counter()
            text = fewer_frames(ours, samples, setup["pad"]) if "pad" in setup else ours(wav)
            seconds[label] += time.perf_counter() - start
            rows[label].append(text)
            print(f"  {label}: {text}")
        ours.search = greedy_search
        ours.model.encoder.use_window(None)
        if theirs is not None:
            start = time.perf_counter()
            hf_ids = hf_greedy(theirs, samples, ours.tokenizer.eot_id)
            seconds["transformers generate"] += time.perf_counter() - start
            rows["transformers generate"].append(ours.tokenizer.decode(hf_ids))
            features = whisper_log_mel(samples)
            same += greedy_tokens(ours.model, features, ours.prefix).ids == hf_ids
            print(f"  transformers generate: {rows['transformers generate'][-1]}")
    print(f"\n{len(data)} recordings, {args.threads} thread(s)")
    corpora = ["librivox", "cards", None] if args.corpus == "all" else [args.corpus]
    print("| column | " + " | ".join(f"WER {c or 'all'}" for c in corpora) + " | s/recording |")
    print("|---" * (len(corpora) + 2) + "|")
    values: dict[str, dict[str, float]] = {}
    for label in labels:
        cells, found = [], values.setdefault(keys[label], {})
        for corpus in corpora:
            picked = [i for i, row in enumerate(data) if corpus is None or row[0] == corpus]
            hypotheses = [rows[label][i] for i in picked]
            rate = word_error_rate(hypotheses, [references[i] for i in picked])
            found[f"wer-{corpus or 'all'}"] = rate
            cells.append(f"{rate:.3f}")
        found["seconds"] = round(seconds[label] / len(data), 3)
        print(f"| {label} | " + " | ".join(cells) + f" | {seconds[label] / len(data):.2f} |")
    if theirs is not None:
        print(f"same tokens as transformers in {same}/{len(data)}")
        values["hf"]["same-tokens"] = same
    # The times are absolute: the machine's 1-minute load average before and after says how
    # busy it was.
    values["load"] = {"start": load_before, "end": os.getloadavg()[0]}
    print(json.dumps(values))  # the numbers, for tests/docs/records.py record


def column_key(setup: dict[str, Any]) -> str:
    """A column's name in the JSON line: ``greedy``, ``trim``, ``own-frames``, ``pad-10``,
    ``window-64`` or ``beam-5``."""
    if "pad" in setup:
        pad = setup["pad"]
        return "own-frames" if pad is None else "trim" if pad == 0 else f"pad-{pad:g}"
    if "window" in setup:
        return f"window-{setup['window']}"
    return f"beam-{setup['beam']}" if "beam" in setup else "greedy"


if __name__ == "__main__":
    main()
