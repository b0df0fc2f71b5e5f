"""Fine-tuning whisper-base on a user's ``path,text`` CSV of real recordings: the CSV files,
and the untuned model's score on them, scored exactly as ``selfattn eval`` scores a run.

The recordings are Debian's pocketsphinx-testdata (fetched on first use): five LibriVox
excerpts of *Sense and Sensibility* and five recordings of playing cards named aloud,
with their transcripts as the package writes them (lower case, no punctuation). ``write
DIR`` copies them into ``DIR/clips/`` and writes

* ``DIR/train.csv``: cards 001 and 002, LibriVox 0870, 0880 and 0890;
* ``DIR/test.csv``: the held-out cards 003, 004 and 005, LibriVox 0920 and 0930;
* with ``--espeak N``, ``DIR/train_espeak.csv``: the training rows and N playing-card
  phrases (one to three cards, drawn with ``--seed``) spoken by espeak-ng (four voices
  taking turns), written as 16 kHz WAVs into ``DIR/espeak/``: the synthetic speech of the
  recordings' vocabulary a user can add to a handful of real recordings.

``untuned CSV`` prints, as one JSON line, whisper-base's metrics on that CSV before any
fine-tuning, with the config's decoding and ``seq2seq.encoder_seconds`` (what ``selfattn
eval RUN --data CSV`` prints for a fine-tuned run).

Usage::

    python benchmarks/whisper_csv.py write recordings --espeak 40
    python benchmarks/whisper_csv.py untuned recordings/test.csv --threads 1
"""

from __future__ import annotations

import argparse
import csv
import json
import shutil
from pathlib import Path

import numpy as np
import soundfile
import torch

from selfattn.config.loading import load_config
from selfattn.data.recipes.espeak import Espeak
from selfattn.pretrained.recordings import CARDS_IDS, LIBRIVOX_IDS, recordings
from selfattn.speech.features import resample
from selfattn.speech.whisper_mel import WHISPER_SAMPLE_RATE
from selfattn.tasks.scored_data import DataFile
from selfattn.tasks.whisper_task import WhisperTask

CONFIG = Path(__file__).resolve().parents[1] / "configs" / "recordings_whisper.toml"
#: The recordings (their WAV files' stems) each CSV holds.
TRAIN = (*CARDS_IDS[:2], *LIBRIVOX_IDS[:3])
TEST = (*CARDS_IDS[2:], *LIBRIVOX_IDS[3:])
RANKS = ("ace", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
         "jack", "queen", "king")  # fmt: skip
SUITS = ("clubs", "diamonds", "hearts", "spades")
VOICES = ("en-us+m3", "en-us+f2", "en+m1", "en-us+f4")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    write = commands.add_parser("write", help="copy the recordings and write the CSV files")
    write.add_argument("folder", type=Path)
    write.add_argument("--espeak", type=int, default=0, metavar="N", help="card phrases")
    write.add_argument("--seed", type=int, default=0)
    untuned = commands.add_parser("untuned", help="whisper-base's metrics on a CSV, untuned")
    untuned.add_argument("csv", type=Path)
    untuned.add_argument("--config", type=Path, default=CONFIG)
    untuned.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE")
    untuned.add_argument("--threads", type=int, default=1)
    return parser.parse_args(argv)


def write_csv(path: Path, rows: list[tuple[str, str]]) -> None:
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(("path", "text"))
        writer.writerows(rows)


def card_phrases(count: int, seed: int) -> list[str]:
    """``count`` phrases of one to three playing cards (``seven of hearts four of clubs``)."""
    rng = np.random.default_rng(seed)
    phrases = []
    for _ in range(count):
        cards = [
            f"{RANKS[rng.integers(len(RANKS))]} of {SUITS[rng.integers(len(SUITS))]}"
            for _ in range(int(rng.integers(1, 4)))
        ]
        phrases.append(" ".join(cards))
    return phrases


def write(folder: Path, espeak: int, seed: int) -> None:
    """The clips and CSV files of the module's docstring, under ``folder``."""
    clips = folder / "clips"
    clips.mkdir(parents=True, exist_ok=True)
    found = {r.path.stem: r for r in recordings()}
    rows: dict[str, list[tuple[str, str]]] = {}
    for split, stems in (("train", TRAIN), ("test", TEST)):
        rows[split] = []
        for stem in stems:
            shutil.copyfile(found[stem].path, clips / f"{stem}.wav")
            rows[split].append((f"clips/{stem}.wav", found[stem].reference))
        write_csv(folder / f"{split}.csv", rows[split])
    if espeak:
        synthesiser = Espeak.fetch()
        (folder / "espeak").mkdir(exist_ok=True)
        extra = []
        for i, phrase in enumerate(card_phrases(espeak, seed)):
            samples, rate = synthesiser.synthesize(phrase, VOICES[i % len(VOICES)])
            name = f"espeak/{i:03d}.wav"
            soundfile.write(folder / name, resample(samples, rate, WHISPER_SAMPLE_RATE), 16000)
            extra.append((name, phrase))
        write_csv(folder / "train_espeak.csv", rows["train"] + extra)
    print(json.dumps({split: len(r) for split, r in rows.items()} | {"espeak": espeak}))


def untuned(path: Path, config_path: Path, overrides: list[str]) -> dict[str, float]:
    """whisper-base's ``selfattn eval`` metrics on the CSV ``path``, not fine-tuned."""
    config = load_config(config_path, [f"data.dataset={path}", "data.dev_fraction=0", *overrides])
    task = WhisperTask(config)
    task.prepare(task.load_splits())
    return task.score(task.build(), DataFile(path))


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if args.command == "write":
        write(args.folder, args.espeak, args.seed)
        return
    torch.set_num_threads(args.threads)
    print(json.dumps({"data": str(args.csv), **untuned(args.csv, args.config, args.set)}))


if __name__ == "__main__":
    main()
