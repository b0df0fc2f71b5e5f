"""End-to-end memory networks on the bAbI-style story recipes: accuracy per task and
number of hops, and whether each hop attends to the facts the answer rests on.

Lecture 003's memory network reads a story's facts with attention, hop after hop
(Sukhbaatar et al. 2015). This script trains ``configs/qa_memn2n.toml`` once per
(recipe, hops) with the same budget and seed, scores the test split on the best dev
checkpoint, and for every hop counts how often the memory it attends to most is one of
the question's supporting facts (:func:`selfattn.data.recipes.stories.supporting_facts`),
printed as a Markdown table and, on the last line, as one JSON object (``qa2-3hop`` ->
``test_accuracy``, ``support_hits`` by hop ``"1"``, ``best_epoch``, ``epochs``,
``seconds``) that ``tests/docs/records.py record`` reads.

Usage::

    python benchmarks/memn2n_babi.py --threads 1                       # qa1-qa3, 1k, 1-3 hops
    python benchmarks/memn2n_babi.py --recipes qa2-10k --hops 3 --threads 1
    python benchmarks/memn2n_babi.py --set model.linear_start_steps=500

A run already finished under ``--out`` is read back instead of trained again.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

import torch

from run_cache import run_arguments, trained_row
from selfattn.data import load_dataset
from selfattn.data.recipes.stories import supporting_facts
from selfattn.models.memory import MemoryTaskModel
from selfattn.tasks import Predictor
from selfattn.train.loop import TrainResult

RESULT = "memn2n.json"


@torch.no_grad()
def support_hits(predictor: Predictor, recipe: str) -> list[float]:
    """Per hop, the share of test questions whose most-attended memory is one of their
    supporting facts."""
    model = predictor.model
    assert isinstance(model, MemoryTaskModel)
    model.eval()
    examples = load_dataset(recipe).test
    support = supporting_facts(recipe, "test")
    hits = [0] * model.network.hops
    start = 0
    for batch in predictor.task.batches_of(examples):
        hops, stories = model.hop_attention(batch)
        # Slot s of a story holds fact s + (facts − kept): the oldest facts are dropped.
        dropped = (stories.facts - stories.facts.clamp(max=model.memory_size)).tolist()
        for hop, weights in enumerate(hops):
            for row, slot in enumerate(weights.argmax(-1).tolist()):
                hits[hop] += slot + dropped[row] in support[start + row]
        start += len(dropped)
    return [hit / len(examples) for hit in hits]


def train_one(recipe: str, hops: int, args: argparse.Namespace) -> dict[str, Any]:
    """Train one (recipe, hops) run, or read its saved result."""

    def describe(result: TrainResult, predictor: Predictor) -> dict[str, Any]:
        return {
            "recipe": recipe,
            "hops": hops,
            "test_accuracy": predictor.evaluate("test")["accuracy"],
            "support_hits": support_hits(predictor, recipe),
        }

    settings = [f"data.dataset={json.dumps(recipe)}", f"model.num_layers={hops}"]
    return trained_row(args, f"{recipe}-{hops}hop", settings, describe, RESULT)


def summary(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The rows as one JSON-ready object by run name (``qa2-3hop``), the support hits keyed
    by hop from 1 (a record keeps numbers, not lists)."""
    return {
        f"{row['recipe']}-{row['hops']}hop": {
            "test_accuracy": row["test_accuracy"],
            "support_hits": {str(hop): hit for hop, hit in enumerate(row["support_hits"], 1)},
            "best_epoch": row["best_epoch"],
            "epochs": row["epochs"],
            "seconds": round(row["seconds"], 1),
        }
        for row in rows
    }


def main(argv: list[str] | None = None) -> None:
    parser = run_arguments(__doc__, "configs/qa_memn2n.toml", "runs/memn2n_babi")
    parser.add_argument("--recipes", default="qa1,qa2,qa3")
    parser.add_argument("--hops", default="1,2,3")
    args = parser.parse_args(argv)
    hop_counts = [int(hops) for hops in args.hops.split(",")]
    rows = [
        train_one(recipe, hops, args) for recipe in args.recipes.split(",") for hops in hop_counts
    ]
    print(f"\n{args.config} (seed {args.seed}), test split, best dev epoch:\n")
    print(
        "| recipe | hops | test accuracy | top memory is a supporting fact, per hop | epoch | s |"
    )
    print("| --- | --- | --- | --- | --- | --- |")
    for row in rows:
        hits = " / ".join(f"{hit:.2f}" for hit in row["support_hits"])
        print(
            f"| `{row['recipe']}` | {row['hops']} | {row['test_accuracy']:.3f} | {hits} | "
            f"{row['best_epoch']} of {row['epochs']} | {row['seconds']:.0f} |"
        )
    print(json.dumps(summary(rows)))


if __name__ == "__main__":
    main()
