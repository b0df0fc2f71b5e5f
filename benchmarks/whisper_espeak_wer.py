"""Word error rate of whisper-base without fine-tuning on espeak-ng speech of held-out WSJ
sentences: ours (selfattn's blocks, greedy with the KV cache) beside transformers'
``WhisperForConditionalGeneration.generate`` (greedy) on the same weights.

Sentences: the Penn Treebank WSJ sample that ``pos-wsj`` reads, lines 901 on (``pos-wsj``'s
test split, which no selfattn model trains on), detokenised (``n't``, ``'s`` and
punctuation joined to their word, quotes and bracket tokens dropped). Each is spoken by
espeak-ng (the recipes' :class:`~selfattn.data.recipes.espeak.Espeak`, the cached Debian
binary) at 175 words a minute, the voices taking turns, resampled to 16 kHz; one longer
than 30 s is transcribed window by window (``chunk``).

Words are compared as :func:`selfattn.pretrained.transcribe.transcript_words` writes them:
numbers above twenty, ``%`` and ``$`` count as errors on both sides alike.

Usage::

    python benchmarks/whisper_espeak_wer.py --threads 1 --sentences 100
"""

from __future__ import annotations

import argparse
import re
import time
from pathlib import Path

import numpy as np
import torch

from selfattn.data.recipes.espeak import Espeak
from selfattn.data.recipes.pos import WSJ_SOURCE
from selfattn.pretrained.transcribe import Transcriber, word_error_rate
from selfattn.speech.features import resample
from selfattn.speech.whisper_mel import WHISPER_SAMPLE_RATE
from whisper_wer import hf_greedy

#: pos-wsj's test split starts at this line (0-based index 900).
FIRST_HELD_OUT = 900
VOICES = ("en-us+m3", "en-us+f2", "en+m1", "en-us+f4")


def detokenise(line: str) -> str:
    """``word/TAG`` tokens → a sentence as written."""
    words = [token.rsplit("/", 1)[0] for token in line.split()]
    words = [w for w in words if w not in ("``", "''", "-LRB-", "-RRB-", "-LCB-", "-RCB-")]
    text = " ".join(words)
    text = re.sub(r" (n't|'s|'re|'ve|'ll|'d|'m|[,.;:?!%])", r"\1", text)
    return re.sub(r"\$ ", "$", text).strip()


def sentences(count: int) -> list[str]:
    """The first ``count`` held-out WSJ sentences."""
    path = next(p for p in WSJ_SOURCE.fetch() if p.name == "tagged-en-wsj.txt")
    lines = path.read_text(encoding="utf-8").splitlines()[FIRST_HELD_OUT:]
    return [detokenise(line) for line in lines if line.strip()][:count]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="whisper-base", help="a name or a Whisper folder")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--sentences", type=int, default=100)
    parser.add_argument("--no-hf", action="store_true", help="ours only (no transformers)")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    ours = Transcriber(args.model, chunk=True)
    theirs = None
    if not args.no_hf:
        import transformers

        model = transformers.WhisperForConditionalGeneration.from_pretrained(Path(ours.folder))
        theirs = model.eval()
    espeak = Espeak.fetch()
    references, hypotheses, hf_hypotheses = [], [], []
    seconds = {"ours": 0.0, "hf": 0.0, "audio": 0.0}
    for index, text in enumerate(sentences(args.sentences)):
        voice = VOICES[index % len(VOICES)]
        samples, rate = espeak.synthesize(text, voice)
        samples = resample(samples, rate, WHISPER_SAMPLE_RATE).astype(np.float32)
        seconds["audio"] += samples.shape[0] / WHISPER_SAMPLE_RATE
        start = time.perf_counter()
        hypotheses.append(ours.transcribe_samples(samples, source=f"sentence {index}"))
        seconds["ours"] += time.perf_counter() - start
        references.append(text)
        print(f"{index} {voice} {samples.shape[0] / WHISPER_SAMPLE_RATE:.1f} s")
        print(f"  reference: {text}")
        print(f"  ours:      {hypotheses[-1]}")
        if theirs is not None and samples.shape[0] <= ours.window_samples:
            start = time.perf_counter()
            ids = hf_greedy(theirs, samples, ours.tokenizer.eot_id)
            seconds["hf"] += time.perf_counter() - start
            hf_hypotheses.append(ours.tokenizer.decode(ids))
            print(f"  hf:        {hf_hypotheses[-1]}")
    count = len(references)
    speech = seconds["audio"] / count
    print(f"\n{count} sentences, {speech:.1f} s of speech each, {args.threads} thread(s)")
    wer = word_error_rate(hypotheses, references)
    print(f"WER ours {wer:.3f}, {seconds['ours'] / count:.2f} s per sentence")
    if theirs is not None and len(hf_hypotheses) == count:
        same = sum(a == b for a, b in zip(hypotheses, hf_hypotheses, strict=True))
        print(
            f"WER transformers {word_error_rate(hf_hypotheses, references):.3f}, "
            f"{seconds['hf'] / count:.2f} s per sentence; same transcript in {same}/{count}"
        )


if __name__ == "__main__":
    main()
