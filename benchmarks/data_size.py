"""ViT vs CNN as the training set grows (lecture 000, §Self-attention v.s. CNN).

The lecture's claim (after Dosovitskiy et al. 2021, Fig. 3): a CNN, self-attention with
its receptive field fixed by hand, is the better model with little data; self-attention
is the more flexible model, so it needs more data, and with enough it catches up or wins.
This script trains the task's ViT and CNN configs (``configs/<task>_vit.toml``,
``configs/<task>_cnn.toml``) on nested, class-stratified subsets of the training split
(``data.train_fraction``: 10 % ⊂ 30 % ⊂ 100 %) and reports test accuracy of the best dev
checkpoint; its last line is the numbers as one JSON object (fraction → ``vit_pct``,
``cnn_pct``, seconds, ``train_size``), which ``tests/docs/records.py record`` reads.

Budget policy: every run takes the same number of optimiser steps — the config's epochs
over the *full* training split — so a 10 % run trains 10 × the epochs (``epochs =
round(config epochs / fraction)``). Smaller sets are not undertrained, and the best dev
epoch guards against their overfitting; what differs between rows is only how much data
the same compute sees.

Usage::

    python benchmarks/data_size.py --task digits --out runs/data_size --threads 1
    python benchmarks/data_size.py --task mnist-5k --fractions 0.1,0.3,1 --out runs/ds
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import torch

from selfattn.config import load_config
from selfattn.tasks import Predictor, run

MODELS = ("vit", "cnn")


def train_one(config_path: Path, fraction: float, out: Path, args: argparse.Namespace) -> dict:
    """Train one config on ``fraction`` of the training split; its test accuracy."""
    epochs = load_config(config_path).train.epochs
    overrides = [
        *args.overrides,
        f"data.train_fraction={fraction}",
        f"train.epochs={max(1, round(epochs / fraction))}",
        f"run_dir={json.dumps(str(out))}",
    ]
    if args.threads:
        overrides.append(f"train.threads={args.threads}")
    config = load_config(config_path, overrides)
    started = time.perf_counter()
    result, prepared = run(config, overwrite=True, progress=not args.no_progress)
    seconds = time.perf_counter() - started
    return {
        "fraction": fraction,
        "train_size": len(prepared.splits.train),
        "epochs": config.train.epochs,
        "steps": result.history[-1]["step"] if result.history else 0,
        "accuracy": Predictor(result.run_dir).evaluate("test")["accuracy"],
        "seconds": seconds,
    }


def table(rows: list[dict[str, Any]]) -> str:
    """fraction, #train, ViT and CNN test accuracy (%), one line per fraction."""
    lines = [f"{'fraction':>8}{'#train':>8}{'ViT acc %':>11}{'CNN acc %':>11}{'ViT - CNN':>11}"]
    for row in rows:
        vit, cnn = 100 * row["vit"]["accuracy"], 100 * row["cnn"]["accuracy"]
        lines.append(
            f"{row['fraction']:>8.0%}{row['train_size']:>8,}{vit:>11.2f}{cnn:>11.2f}"
            f"{vit - cnn:>+11.2f}"
        )
    return "\n".join(lines)


def plot(rows: list[dict[str, Any]], task: str, path: Path) -> None:
    """Test accuracy against training-set size, one line per model (PNG)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sizes = [row["train_size"] for row in rows]
    fig, ax = plt.subplots(figsize=(5, 3.5))
    for model, label in (("vit", "ViT (self-attention)"), ("cnn", "CNN")):
        ax.plot(sizes, [100 * row[model]["accuracy"] for row in rows], "o-", label=label)
    ax.set_xscale("log")
    ax.set_xticks(sizes, [f"{size:,}" for size in sizes])
    ax.minorticks_off()
    ax.set_xlabel("training images")
    ax.set_ylabel("test accuracy (%)")
    ax.set_title(f"{task}: ViT vs CNN as the data grows")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--task", default="digits", help="digits, mnist-5k or fashion-mnist")
    parser.add_argument("--fractions", default="0.1,0.3,1.0")
    parser.add_argument("--configs", type=Path, default=Path("configs"))
    parser.add_argument("--set", dest="overrides", action="append", default=[])
    parser.add_argument("--out", type=Path, default=Path("runs/data_size"))
    parser.add_argument("--threads", type=int, help="torch threads (default: torch's own)")
    parser.add_argument("--no-progress", action="store_true")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    fractions = sorted(float(f) for f in args.fractions.split(",") if f.strip())
    stem = args.task.replace("-", "_")
    paths = {model: args.configs / f"{stem}_{model}.toml" for model in MODELS}
    for path in paths.values():
        if not path.exists():
            parser.error(f"no config for task {args.task!r}: {path} does not exist")
    out = args.out / stem
    out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    rows = []
    for fraction in fractions:
        row: dict[str, Any] = {"fraction": fraction}
        for model, path in paths.items():
            result = train_one(path, fraction, out / f"{model}_{fraction:g}", args)
            row[model], row["train_size"] = result, result["train_size"]
            print(f"{fraction:.0%} {model}: accuracy {result['accuracy']:.4f}", flush=True)
        rows.append(row)
    (out / "results.json").write_text(json.dumps(rows, indent=2) + "\n", encoding="utf-8")
    plot(rows, args.task, out / "data_size.png")
    print(table(rows))
    print(
        f"({time.perf_counter() - started:.0f} s; {out / 'results.json'}, {out / 'data_size.png'})"
    )
    # The numbers once more as one JSON object (fraction → model → test accuracy in %, the
    # training images), for tests/docs/records.py record.
    found = {
        f"{row['fraction']:g}": {
            "train_size": row["train_size"],
            **{f"{model}_pct": 100 * row[model]["accuracy"] for model in MODELS},
            **{f"{model}_seconds": row[model]["seconds"] for model in MODELS},
        }
        for row in rows
    }
    print(json.dumps(found))


if __name__ == "__main__":
    main()
