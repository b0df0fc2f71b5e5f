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
from typing import Any

from run_cache import run_arguments, trained_row
from selfattn.tasks import Predictor
from selfattn.train.loop import TrainResult

SCORES = ("dot", "scaled_dot", "additive")
NORMALIZERS = ("softmax", "relu")
RESULT = "attention_options.json"


def train_one(score: str, normalizer: str, args: argparse.Namespace) -> dict[str, Any]:
    """Train one combination (or read its saved result); its test accuracy."""

    def describe(result: TrainResult, predictor: Predictor) -> dict[str, Any]:
        return {
            "score": score,
            "normalizer": normalizer,
            "test_accuracy": predictor.evaluate("test")["accuracy"],
            "dev_accuracy": (result.best or {}).get("dev_accuracy"),
        }

    settings = [f"model.score={json.dumps(score)}", f"model.normalizer={json.dumps(normalizer)}"]
    return trained_row(args, f"{score}-{normalizer}", settings, describe, RESULT)


def main() -> None:
    parser = run_arguments(__doc__, "configs/sentiment_rt.toml", "runs/attention_options")
    parser.add_argument("--scores", default=",".join(SCORES))
    parser.add_argument("--normalizers", default=",".join(NORMALIZERS))
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
