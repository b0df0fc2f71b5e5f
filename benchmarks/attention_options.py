"""The lecture's attention options on real data: score × normaliser on sentiment-rt.

Lecture 000 computes the relevance α between two vectors by a dot product (or the
additive form) and normalises a query's row with softmax — "you can also use ReLU"
(the slide's aside). This script trains ``configs/sentiment_rt.toml`` once per
(``model.score``, ``model.normalizer``) with the same budget and seed, and reports the
test accuracy of each run's best dev epoch, as a Markdown table.

Usage::

    python benchmarks/attention_options.py --out runs/attention_options --threads 1
    python benchmarks/attention_options.py --normalizers softmax,relu,sigmoid

A run already finished under ``--out`` is read back instead of trained again.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

from selfattn.pipeline import Predictor, run
from selfattn.train.config import load_config

SCORES = ("dot", "scaled_dot", "additive")
NORMALIZERS = ("softmax", "relu")
RESULT = "attention_options.json"


def train_one(score: str, normalizer: str, args: argparse.Namespace) -> dict[str, Any]:
    """Train one combination (or read its saved result); its test accuracy."""
    out = args.out / f"{score}-{normalizer}"
    saved = out / RESULT
    if saved.is_file():
        return dict(json.loads(saved.read_text(encoding="utf-8")))
    overrides = [
        *args.overrides,
        f"model.score={json.dumps(score)}",
        f"model.normalizer={json.dumps(normalizer)}",
        f"run_dir={json.dumps(str(out))}",
        f"train.seed={args.seed}",
    ]
    if args.threads:
        overrides.append(f"train.threads={args.threads}")
    config = load_config(args.config, overrides)
    started = time.perf_counter()
    result, _ = run(config, overwrite=True, progress=not args.no_progress)
    best = result.best or {}
    row = {
        "score": score,
        "normalizer": normalizer,
        "test_accuracy": Predictor(result.run_dir).evaluate("test")["accuracy"],
        "best_epoch": best.get("epoch"),
        "dev_accuracy": best.get("dev_accuracy"),
        "epochs": len(result.history),
        "seconds": time.perf_counter() - started,
    }
    saved.write_text(json.dumps(row, indent=2) + "\n", encoding="utf-8")
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", type=Path, default=Path("configs/sentiment_rt.toml"))
    parser.add_argument("--out", type=Path, default=Path("runs/attention_options"))
    parser.add_argument("--scores", default=",".join(SCORES))
    parser.add_argument("--normalizers", default=",".join(NORMALIZERS))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, help="train.threads of every run")
    parser.add_argument("--set", dest="overrides", action="append", default=[])
    parser.add_argument("--no-progress", action="store_true")
    args = parser.parse_args()
    rows = [
        train_one(score, normalizer, args)
        for score in args.scores.split(",")
        for normalizer in args.normalizers.split(",")
    ]
    print(f"\n{args.config} (seed {args.seed}), test accuracy of the best dev epoch:\n")
    normalizers = args.normalizers.split(",")
    print("| score | " + " | ".join(normalizers) + " |")
    print("| --- |" + " --- |" * len(normalizers))
    for score in args.scores.split(","):
        cells = [
            f"{row['test_accuracy']:.4f} (epoch {row['best_epoch']})"
            for normalizer in normalizers
            for row in rows
            if row["score"] == score and row["normalizer"] == normalizer
        ]
        print(f"| {score} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
