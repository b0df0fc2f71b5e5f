"""Word error rate of whisper-base without fine-tuning on the real recordings of Debian's
pocketsphinx-testdata: ours (selfattn's blocks, greedy with the KV cache) beside
transformers' ``WhisperForConditionalGeneration.generate`` (greedy) on the same weights,
with the seconds per recording of each at the thread count given.

Recordings: the five LibriVox excerpts (``librivox/``, 3–7 s, read English prose) and the
five ``cards/`` ones (1–3.5 s, playing cards named in isolation). Both sides read Whisper's
30 s window (the recording zero-padded); ``--own-frames`` adds a column where our encoder
reads only the recording's own frames (⌊N / 160⌋, no padding), which costs a fraction of
the encoder but is not what Whisper was trained on.

Words are compared as :func:`selfattn.pretrained.transcribe.transcript_words` writes them
(lower case, no punctuation, hyphens split, ``Mr.`` → mister, numbers up to 20 spelled).

Usage::

    python benchmarks/whisper_wer.py --threads 1
    python benchmarks/whisper_wer.py --threads 1 --own-frames --no-hf
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch

from selfattn.data.readers.audio import read_wav
from selfattn.pretrained.recordings import recordings as pocketsphinx_recordings
from selfattn.pretrained.transcribe import Transcriber, greedy_tokens, word_error_rate
from selfattn.speech.whisper_mel import whisper_log_mel


def recordings() -> list[tuple[str, Path, str]]:
    """``(set, WAV file, reference)`` for every recording, fetched on first use."""
    return [(r.corpus, r.path, r.reference) for r in pocketsphinx_recordings()]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="whisper-base", help="a name or a Whisper folder")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--no-hf", action="store_true", help="ours only (no transformers)")
    parser.add_argument("--own-frames", action="store_true", help="also: the recording's frames")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    ours = Transcriber(args.model)
    theirs = None
    if not args.no_hf:
        import transformers

        folder = Path(ours.folder)
        model = transformers.WhisperForConditionalGeneration.from_pretrained(folder)
        theirs = model.eval()
    rows: dict[str, list[str]] = {"ours": [], "hf": [], "own": [], "ref": []}
    seconds: dict[str, float] = {"ours": 0.0, "hf": 0.0, "own": 0.0}
    same = 0
    data = recordings()
    for corpus, wav, reference in data:
        samples, _ = read_wav(wav, sample_rate=16000)
        start = time.perf_counter()
        text = ours(wav)
        seconds["ours"] += time.perf_counter() - start
        rows["ours"].append(text)
        rows["ref"].append(reference)
        print(f"{corpus} {wav.stem}  {len(samples) / 16000:.2f} s")
        print(f"  reference: {reference}")
        print(f"  ours:      {text}")
        if theirs is not None:
            start = time.perf_counter()
            with torch.no_grad():
                ids = theirs.generate(
                    whisper_log_mel(samples).unsqueeze(0),
                    language="en",
                    task="transcribe",
                    do_sample=False,
                    num_beams=1,
                )[0].tolist()
            seconds["hf"] += time.perf_counter() - start
            hf_ids = [i for i in ids if i < ours.tokenizer.eot_id]
            rows["hf"].append(ours.tokenizer.decode(hf_ids))
            features = whisper_log_mel(samples)
            same += greedy_tokens(ours.model, features, ours.prefix).ids == hf_ids
            print(f"  hf:        {rows['hf'][-1]}")
        if args.own_frames:
            start = time.perf_counter()
            features = whisper_log_mel(samples, num_samples=None)
            own = greedy_tokens(ours.model, features[:, : features.shape[1] // 2 * 2], ours.prefix)
            seconds["own"] += time.perf_counter() - start
            rows["own"].append(ours.tokenizer.decode(own.ids))
            print(f"  own frames: {rows['own'][-1]}")
    print(f"\n{len(data)} recordings, {args.threads} thread(s)")
    columns = [("ours", "ours (30 s window)")]
    if theirs is not None:
        columns.append(("hf", "transformers generate"))
    if args.own_frames:
        columns.append(("own", "ours, the recording's frames"))
    for corpus in ("librivox", "cards", None):
        picked = [i for i, row in enumerate(data) if corpus is None or row[0] == corpus]
        references = [rows["ref"][i] for i in picked]
        cells = [
            f"{label} {word_error_rate([rows[key][i] for i in picked], references):.3f}"
            for key, label in columns
        ]
        print(f"WER {corpus or 'all':<8}: " + " | ".join(cells))
    per = " | ".join(f"{label} {seconds[key] / len(data):.2f} s" for key, label in columns)
    print(f"time per recording: {per}")
    if theirs is not None:
        print(f"same tokens as transformers in {same}/{len(data)}")


if __name__ == "__main__":
    main()
