"""Long Range Arena runner: every attention variant on every task, under one budget.

Each (task, variant) pair is trained by the library's own loop (``selfattn train`` with
``model.attention`` set to the variant) from the task's config, ``configs/lra_<task>.toml``,
all with the same model size, batches, seed and epochs. The table gives test accuracy,
training steps per second and the peak memory of one training step on the longest batch,
each speed and memory also as a ratio to the dense Transformer in the same run, beside
the accuracies of the LRA paper (Tay et al. 2021, Table 1; Nyströmformer from Xiong et al.
2021, Table 4) — which were trained for far longer on TPUs, on the full-size tasks (our
``lra-text`` and ``lra-image`` are stand-ins built from the data available here; see
:mod:`selfattn.data.recipes.lra`).

Usage::

    python benchmarks/lra.py                                  # all tasks, all variants
    python benchmarks/lra.py --tasks listops --variants dense,window,linear
    python benchmarks/lra.py --tasks listops --set train.epochs=2 --threads 2
    python benchmarks/lra.py --report --out runs/lra     # the table of runs made before

The table is followed by one JSON line keyed ``task.variant`` (accuracy, steps a second,
the step's peak MiB and, beside a dense row, both as ratios to it), which
``tests/docs/records.py record`` reads.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import torch

from selfattn.bench.memory import measure_memory
from selfattn.config import load_config
from selfattn.kernels import KERNELS
from selfattn.tasks import Predictor, run

#: The LRA paper's test accuracies (%): ListOps, Text, Image. The rows of Table 1 that
#: correspond to our variants; Nyströmformer's from its own paper (Xiong et al. 2021).
PAPER = {
    "dense": ("Transformer", 36.37, 64.27, 42.44),
    "window": ("Local Attention", 15.82, 52.98, 41.46),
    "linear": ("Linear Trans.", 16.13, 65.90, 42.34),
    "performer": ("Performer", 18.01, 65.40, 42.77),
    "linformer": ("Linformer", 35.70, 53.94, 38.56),
    "lsh": ("Reformer", 37.27, 56.10, 38.07),
    "nystrom": ("Nyströmformer", 37.15, 65.52, 41.58),
}
TASKS = {"listops": 1, "text": 2, "image": 3}  # column of PAPER


def train_one(
    config_path: Path, task: str, variant: str, args: argparse.Namespace
) -> dict[str, Any]:
    """Train ``variant`` on ``task``; its accuracy, speed and memory."""
    overrides = [
        *args.overrides,
        f"model.attention={json.dumps(variant)}",
        f"run_dir={json.dumps(str(args.out / task / variant))}",
    ]
    if variant == "window":
        overrides.append(f"model.attention_size={args.window}")
    config = load_config(config_path, overrides)
    result, prepared = run(config, overwrite=True, progress=not args.no_progress)
    steps = result.history[-1]["step"] if result.history else 0
    seconds = sum(line["seconds"] for line in result.history)
    accuracy = Predictor(result.run_dir).evaluate("test")["accuracy"]

    # Peak memory of one training step (forward + backward) on the longest batch.
    model = result.model
    model.train()
    objective = prepared.task
    longest = sorted(prepared.splits.train, key=len)[-config.data.batch_size :]
    batch = objective.collate(longest).to(next(model.parameters()).device)

    def step() -> None:
        objective.loss(model, batch, 0).backward()
        model.zero_grad(set_to_none=True)

    device = next(model.parameters()).device
    memory = measure_memory(step, device).peak
    return {
        "task": task,
        "variant": variant,
        "accuracy": accuracy,
        "steps": steps,
        "steps_per_s": steps / seconds if seconds else float("nan"),
        "step_peak_bytes": memory,
        "epochs": len(result.history),
    }


def latest(path: Path, tasks: list[str], variants: list[str]) -> list[dict[str, Any]]:
    """The last row of each (task, variant) in a results file, in the order asked."""
    if not path.exists():
        raise SystemExit(f"no results yet: {path} does not exist")
    rows: dict[tuple[str, str], dict[str, Any]] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        rows[(row["task"], row["variant"])] = row
    order = list(dict.fromkeys(["dense", *variants]))
    return [rows[(t, v)] for t in tasks for v in order if (t, v) in rows]


def report(rows: list[dict[str, Any]]) -> str:
    """The accuracy / speed / memory table, with the paper's accuracy beside ours."""
    lines = [
        f"{'task':<9}{'variant':<11}{'acc %':>7}{'paper %':>9}  {'(paper model)':<17}"
        f"{'steps/s':>9}{'x dense':>9}{'step MiB':>10}{'x dense':>9}"
    ]
    ratios = summary(rows)
    for task in dict.fromkeys(row["task"] for row in rows):
        for row in (row for row in rows if row["task"] == task):
            name, *scores = PAPER.get(row["variant"], ("-", None, None, None))
            paper = scores[TASKS[task] - 1] if task in TASKS else None
            mine = ratios[f"{task}.{row['variant']}"]
            speed = mine.get("speed_vs_dense", float("nan"))
            memory = mine.get("memory_vs_dense", 0.0)
            lines.append(
                f"{task:<9}{row['variant']:<11}{100 * row['accuracy']:>7.2f}"
                f"{paper if paper is not None else '-':>9}  {name:<17}"
                f"{row['steps_per_s']:>9.2f}{speed:>9.2f}"
                f"{row['step_peak_bytes'] / 2**20:>10.1f}{memory:>9.2f}"
            )
    return "\n".join(lines)


def summary(rows: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """The table's rows as one JSON-ready object keyed ``task.variant`` (``listops.window``):
    accuracy, steps a second, the step's peak MiB and, where the task has a dense row, both
    as ratios to it; for ``tests/docs/records.py record``."""
    found: dict[str, dict[str, float]] = {}
    for row in rows:
        values = {
            "accuracy": row["accuracy"],
            "steps_per_s": row["steps_per_s"],
            "step_mib": row["step_peak_bytes"] / 2**20,
        }
        dense = next(
            (r for r in rows if r["task"] == row["task"] and r["variant"] == "dense"), None
        )
        if dense is not None:
            values["speed_vs_dense"] = row["steps_per_s"] / dense["steps_per_s"]
            values["memory_vs_dense"] = row["step_peak_bytes"] / max(dense["step_peak_bytes"], 1)
        found[f"{row['task']}.{row['variant']}"] = values
    return found


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", default="listops,text,image", help="from listops, text, image")
    parser.add_argument("--variants", default=",".join(PAPER), help=f"from {', '.join(KERNELS)}")
    parser.add_argument(
        "--configs", type=Path, default=Path("configs"), help="lra_<task>.toml here"
    )
    parser.add_argument("--set", dest="overrides", action="append", default=[])
    parser.add_argument("--out", type=Path, default=Path("runs/lra"))
    parser.add_argument("--threads", type=int, help="torch threads (default: torch's own)")
    parser.add_argument("--window", type=int, default=128, help="w of the window variant")
    parser.add_argument(
        "--report", action="store_true", help="only print the table of OUT/results.jsonl"
    )
    parser.add_argument("--no-progress", action="store_true")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    tasks = [name.strip() for name in args.tasks.split(",") if name.strip()]
    variants = [name.strip() for name in args.variants.split(",") if name.strip()]
    for name in variants:
        if name not in KERNELS:
            parser.error(f"unknown variant {name!r}; choose from {', '.join(KERNELS)}")
    results = args.out / "results.jsonl"
    if args.report:
        rows = latest(results, tasks, variants)
        print(report(rows))
        print(json.dumps(summary(rows)))
        return
    args.out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    for task in tasks:
        path = args.configs / f"lra_{task}.toml"
        if not path.exists():
            parser.error(f"no config for task {task!r}: {path} does not exist")
        for variant in variants:
            row = train_one(path, task, variant, args)
            with results.open("a", encoding="utf-8") as f:
                f.write(json.dumps(row) + "\n")
            print(f"{task} {variant}: accuracy {row['accuracy']:.4f}", flush=True)
    # Earlier runs in OUT (e.g. dense from another invocation) fill the table too.
    rows = latest(results, tasks, [*variants, "dense"])
    print(report(rows))
    print(f"({time.perf_counter() - started:.0f} s; rows appended to {results})")
    print(json.dumps(summary(rows)))


if __name__ == "__main__":
    main()
