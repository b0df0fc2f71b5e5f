"""ONNX Runtime against PyTorch eager, and int8 weights against float32: the latency of
trained runs' models.

Exports each run's model with ``selfattn export`` (checked against PyTorch to 1e-4), then
times both on the same batches of the run's own test sentences (dev, if it has none) —
batch 1 and batch 32, interleaved so a busy machine slows both alike — and prints the
median milliseconds per batch and the ratio ONNX ÷ eager (below 1: ONNX Runtime is
faster). One thread for both unless ``--threads`` says otherwise. Each round starts one
side later (eager, ONNX; ONNX, eager; …), so no side always runs right after the same
other one: at batch 1 a call ran faster right after a call of the other ONNX file and
slower right after PyTorch's (the pos tagger's int8 ÷ float32 looked 0.56 with the order
fixed, 0.89 alternating the two files alone).

Each call is timed twice: wall-clock, and the CPU time the process spent in it
(``time.process_time``). At one thread on an idle core the two agree; on a machine shared
with other jobs the wall-clock time is mostly waiting for a core (a batch of 32 sentences
took 60 ms wall-clock and 4.5 ms of CPU on two cores at load average 7), so a wall-clock
ratio is pulled towards 1 and the CPU-time ratio is the one that says what the model
costs. With more than one thread the CPU time sums the threads: it is not a latency.

With ``--int8`` it also quantises the ONNX file as ``selfattn export --quantize int8`` does
(ONNX Runtime's dynamic quantisation), times it in the same interleaved rounds and prints
int8 ÷ float32 ONNX Runtime (the median over rounds of the two calls' ratio, wall-clock
and CPU), then scores both files through ONNX Runtime on the dev and test splits (the run's
main metric, and the change in points). ``--profile`` adds ONNX Runtime's profile of both
files (one thread): where float32's kernel time goes by operator, and the share in the
weight products and embedding lookups that int8 replaces — the rest is left float32 by int8,
so ``1 − share`` is the lowest int8 ÷ float32 that int8 weights could give.

The last line is JSON: every number printed, by run folder name.

Usage::

    python benchmarks/export_latency.py runs/sentiment_rt_minilm --threads 1
    python benchmarks/export_latency.py runs/sentiment_rt runs/pos_wsj --threads 1 --int8

A run is any token or sequence run with an ONNX-exportable model (a model fine-tuned
from MiniLM included: then the batches are its wordpieces).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from selfattn.export.exporters import export_run, exportable_of, onnx_runner
from selfattn.export.quantize import (
    QUANTIZED_OPS,
    drop,
    main_metric,
    onnx_score,
    quantize_int8,
)
from selfattn.tasks import Predictor

sys.path.insert(0, str(Path(__file__).resolve().parent))
from onnx_profile import kernel_profile


def timed(function: Any, inputs: tuple[Any, ...]) -> tuple[float, float]:
    """Milliseconds of one call: wall-clock, and the process's CPU time."""
    wall, cpu = time.perf_counter(), time.process_time()
    function(*inputs)
    return (time.perf_counter() - wall) * 1000, (time.process_time() - cpu) * 1000


def paired(ours: list[float], reference: list[float]) -> float:
    """The median over rounds of ours ÷ reference: a load change between rounds hits both."""
    return statistics.median(q / f for q, f in zip(ours, reference, strict=True))


def latency(args: argparse.Namespace, run: Path, folder: Path) -> dict[str, Any]:
    """Time (and with ``--int8`` score) one run; print its table; return its numbers."""
    predictor = Predictor(run)
    model = predictor.model.eval()
    path = folder / "model.onnx"
    print(export_run(model, predictor.task, predictor.spec.max_len, "onnx", path))
    exportable = exportable_of(model, predictor.task)  # type: ignore[arg-type]
    sides: dict[str, Callable[..., Any]] = {
        "eager": exportable.module,
        "onnx": onnx_runner(exportable, path)[0],
    }
    if args.int8:
        ops, per_channel = tuple(args.ops.split(",")), not args.per_tensor
        quantize_int8(path, folder / "int8.onnx", ops, per_channel=per_channel)
        scales = "tensor" if args.per_tensor else "output channel"
        print(f"int8: weights of {args.ops} quantised, one scale per {scales}")
        sides["int8"] = onnx_runner(exportable, folder / "int8.onnx")[0]
    print(f"{run}: {args.threads} thread(s), median of {args.repeats} calls; wall-clock | CPU")
    extra = "  int8 ms  int8 / onnx" if args.int8 else ""
    print(f"batch  tokens  eager ms  onnxruntime ms  onnx / eager{extra}")
    splits = predictor.task.load_splits()
    test = splits.test or splits.dev  # a run without test sentences: its dev ones
    found: dict[str, Any] = {}
    for size in (int(value) for value in args.batches.split(",")):
        inputs = exportable.graph_inputs(predictor.task.collate(test[:size]))
        times: dict[str, tuple[list[float], list[float]]] = {name: ([], []) for name in sides}
        with torch.no_grad():
            for _ in range(3):  # warm-up
                for function in sides.values():
                    function(*inputs)
            order = list(sides.items())
            for round_ in range(args.repeats):  # each round starts one side later
                start = round_ % len(order)
                for name, function in order[start:] + order[:start]:
                    for clock, value in zip(times[name], timed(function, inputs), strict=True):
                        clock.append(value)
        numbers: dict[str, Any] = {"tokens": inputs[0].numel()}
        for index, clock in enumerate(("wall", "cpu")):
            ms = {name: statistics.median(values[index]) for name, values in times.items()}
            a, b = ms["eager"], ms["onnx"]
            row = f"{size:5d}  {inputs[0].numel():6d}  {a:8.3f}  {b:14.3f}  {b / a:12.2f}"
            numbers[clock] = {"eager_ms": a, "onnx_ms": b, "onnx_over_eager": b / a}
            if args.int8:
                ratio = paired(times["int8"][index], times["onnx"][index])
                row += f"  {ms['int8']:7.3f}  {ratio:11.2f}"
                numbers[clock] |= {"int8_ms": ms["int8"], "int8_over_float32": ratio}
            print(f"{row}  ({clock})")
        if args.profile:
            files = {"float32": path, "int8": folder / "int8.onnx"} if args.int8 else {}
            numbers["profile"] = kernel_profile(files or {"float32": path}, inputs, exportable)
            share = numbers["profile"]["float32"]["weight_share"]
            print(
                f"       float32's kernel time in weight products and lookups: "
                f"{100 * share:.0f}% (int8 ÷ float32 ≥ {1 - share:.2f})"
            )
        found[f"batch{size}"] = numbers
    if args.int8:
        for split in (name for name in ("dev", "test") if getattr(splits, name)):
            scores = {
                name: onnx_score(predictor.task, model, exportable, folder / file, split)
                for name, file in (("float32", "model.onnx"), ("int8", "int8.onnx"))
            }
            metric = main_metric(scores["float32"])
            float32, int8 = scores["float32"][metric], scores["int8"][metric]
            change = -drop(metric, float32, int8)
            found[split] = {"metric": metric, "float32": float32, "int8": int8}
            print(
                f"{split} {metric}: float32 {float32:.4f}, int8 {int8:.4f} "
                f"({round(change, 2) + 0.0:+.2f} {'%' if metric == 'rmse' else 'points'})"
            )
    return found


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", type=Path, nargs="+", help="run folders (token or sequence task)")
    parser.add_argument("--batches", default="1,32", help="batch sizes, comma-separated")
    parser.add_argument("--repeats", type=int, default=30, help="timed calls per side")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--int8", action="store_true", help="time and score int8 weights too")
    parser.add_argument(
        "--ops",
        default=",".join(QUANTIZED_OPS),
        help="with --int8: the ONNX operators whose weights are quantised (default: what "
        "selfattn export --quantize int8 quantises)",
    )
    parser.add_argument(
        "--per-tensor",
        action="store_true",
        help="with --int8: one scale per weight tensor instead of export's one per channel",
    )
    parser.add_argument(
        "--profile",
        action="store_true",
        help="ONNX Runtime's profile of the float32 (and int8) file: time by operator",
    )
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    found: dict[str, Any] = {"threads": args.threads, "repeats": args.repeats}
    for run in args.runs:
        with tempfile.TemporaryDirectory() as folder:
            found[run.name] = latency(args, run, Path(folder))
    print(json.dumps(found))


if __name__ == "__main__":
    main()
