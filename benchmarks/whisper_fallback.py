"""Whisper's temperature fallback on noisy real speech: whisper-base's word error rate on
Debian's pocketsphinx-testdata recordings with white noise added (``--snr`` dB), greedy
decoding beside greedy with the fallback (ours at best-of 1 and best-of 5), and
transformers' ``generate(temperature=(0.0, 0.2, …, 1.0), compression_ratio_threshold=2.4,
logprob_threshold=-1.0, no_speech_threshold=0.6)`` on the same weights.

Noise makes Whisper unsure: where greedy decoding's mean log-probability falls below −1
(or its text loops), the fallback samples the window again hotter. The noise is seeded, so
every column hears the same recordings. Both sides read Whisper's 30 s window. Sampling
draws differ between the two libraries (their generators), so only the decision to fall
back is comparable token for token; the transcripts after it are each one draw.

Usage::

    python benchmarks/whisper_fallback.py --threads 1 --snr -5
    python benchmarks/whisper_fallback.py --threads 1 --snr inf --no-hf   # no noise
"""

from __future__ import annotations

import argparse
import time
from collections import defaultdict
from typing import Any

import numpy as np
import torch

from selfattn.data.readers.audio import read_wav
from selfattn.decoding.whisper import fallback_searches
from selfattn.pretrained.fallback import compression_ratio
from selfattn.pretrained.recordings import recordings
from selfattn.pretrained.transcribe import Transcriber, word_error_rate
from selfattn.speech.whisper_mel import whisper_log_mel


def noisy(samples: np.ndarray, snr_db: float, rng: np.random.Generator) -> np.ndarray:
    """``samples`` plus white noise ``snr_db`` dB below their mean power."""
    power = float((samples.astype(np.float64) ** 2).mean())
    noise = rng.standard_normal(samples.shape[0]) * np.sqrt(power / 10 ** (snr_db / 10))
    return (samples + noise).astype(np.float32)


def hf_fallback(model: Any, samples: np.ndarray, eot_id: int) -> list[int]:
    """transformers' ``generate`` with Whisper's fallback on the 30 s window."""
    ids = model.generate(
        whisper_log_mel(samples).unsqueeze(0),
        language="en",
        task="transcribe",
        temperature=(0.0, 0.2, 0.4, 0.6, 0.8, 1.0),
        compression_ratio_threshold=2.4,
        logprob_threshold=-1.0,
        no_speech_threshold=0.6,
    )[0].tolist()
    return [i for i in ids if i < eot_id]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="whisper-base", help="a name or a Whisper folder")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument(
        "--snr", type=float, default=-5.0, help="speech over noise, dB (default -5; inf: none)"
    )
    parser.add_argument("--seed", type=int, default=0, help="the noise's and sampling's seed")
    parser.add_argument("--no-hf", action="store_true", help="ours only (no transformers)")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    best_of_1 = Transcriber(args.model, fallback=fallback_searches(best_of=1, seed=args.seed))
    best_of_5 = Transcriber(args.model, fallback=fallback_searches(best_of=5, seed=args.seed))
    theirs = None
    if not args.no_hf:
        import transformers

        folder = best_of_1.folder
        theirs = transformers.WhisperForConditionalGeneration.from_pretrained(folder).eval()
    rng = np.random.default_rng(args.seed)
    texts: dict[str, list[str]] = defaultdict(list)
    seconds: dict[str, float] = defaultdict(float)
    references, fell_back = [], 0
    for recording in recordings():
        samples, _ = read_wav(recording.path, sample_rate=16000)
        samples = noisy(samples, args.snr, rng)
        references.append(recording.reference)
        print(f"{recording.path.stem}: {recording.reference}")
        for label, transcriber in (("best of 1", best_of_1), ("best of 5", best_of_5)):
            start = time.perf_counter()
            attempts = transcriber.attempts(samples)
            seconds[f"fallback, {label}"] += time.perf_counter() - start
            greedy, kept = attempts[0], attempts[-1]
            if label == "best of 1":
                texts["greedy"].append(greedy.text)
                fell_back += len(attempts) > 1
                print(
                    f"  greedy: {greedy.text!r} (mean log-prob "
                    f"{greedy.decoded.mean_log_prob:.3f}, compression "
                    f"{compression_ratio(greedy.text):.2f}, "
                    f"no speech {greedy.decoded.no_speech:.3f})"
                )
            silent = transcriber.checks.is_silence(kept.decoded)
            texts[f"fallback, {label}"].append("" if silent else kept.text)
            tried = ", ".join(f"{a.temperature:g}" for a in attempts)
            print(f"  fallback, {label}: {texts[f'fallback, {label}'][-1]!r} (tried {tried})")
        if theirs is not None:
            start = time.perf_counter()
            with torch.no_grad():
                ids = hf_fallback(theirs, samples, best_of_1.tokenizer.eot_id)
            seconds["transformers fallback"] += time.perf_counter() - start
            texts["transformers fallback"].append(best_of_1.tokenizer.decode(ids))
            print(f"  transformers fallback: {texts['transformers fallback'][-1]!r}")
    count = len(references)
    print(f"\nSNR {args.snr:g} dB; greedy fell back on {fell_back} of {count} recordings")
    print("| decoding | WER | s / recording |\n|---|---|---|")
    for label, hypotheses in texts.items():
        wer = word_error_rate(hypotheses, references)
        time_taken = "" if label == "greedy" else f"{seconds[label] / count:.2f}"
        print(f"| {label} | {wer:.3f} | {time_taken} |")


if __name__ == "__main__":
    main()
