"""ONNX Runtime against PyTorch eager, and int8 weights against float32: the latency of
one trained run's model.

Exports the run's model with ``selfattn export`` (checked against PyTorch to 1e-4), then
times both on the same batches of the run's own test sentences — batch 1 and batch 32,
interleaved (eager, ONNX, eager, ONNX …) so a busy machine slows both alike — and prints
the median milliseconds per batch and the ratio ONNX ÷ eager (below 1: ONNX Runtime is
faster). One thread for both unless ``--threads`` says otherwise.

With ``--int8`` it also quantises the ONNX file as ``selfattn export --quantize int8`` does
(ONNX Runtime's dynamic quantisation), times it in the same interleaved rounds and prints
int8 ÷ float32 ONNX Runtime (the median over rounds of the two calls' ratio), then scores
both files through ONNX Runtime on the dev and test splits (the run's main metric, and
the change in points).

Usage::

    python benchmarks/export_latency.py runs/sentiment_rt_minilm --threads 1
    python benchmarks/export_latency.py runs/sentiment_rt --threads 1 --int8

The run is any token or sequence run with an ONNX-exportable model (a model fine-tuned
from MiniLM included: then the batches are its wordpieces).
"""

from __future__ import annotations

import argparse
import statistics
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


def timed(function: Any, inputs: tuple[Any, ...]) -> float:
    started = time.perf_counter()
    function(*inputs)
    return (time.perf_counter() - started) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run", type=Path, help="a run folder (token or sequence task)")
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
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    predictor = Predictor(args.run)
    model = predictor.model.eval()
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "model.onnx"
        print(export_run(model, predictor.task, predictor.spec.max_len, "onnx", path))
        exportable = exportable_of(model, predictor.task)  # type: ignore[arg-type]
        sides: dict[str, Callable[..., Any]] = {
            "eager": exportable.module,
            "onnx": onnx_runner(exportable, path)[0],
        }
        if args.int8:
            ops, per_channel = tuple(args.ops.split(",")), not args.per_tensor
            quantize_int8(path, Path(folder) / "int8.onnx", ops, per_channel=per_channel)
            scales = "tensor" if args.per_tensor else "output channel"
            print(f"int8: weights of {args.ops} quantised, one scale per {scales}")
            sides["int8"] = onnx_runner(exportable, Path(folder) / "int8.onnx")[0]
        print(f"{args.run}: {args.threads} thread(s), median of {args.repeats} calls")
        extra = "  int8 ms  int8 / onnx" if args.int8 else ""
        print(f"batch  tokens  eager ms  onnxruntime ms  onnx / eager{extra}")
        test = predictor.task.load_splits().test
        for size in (int(value) for value in args.batches.split(",")):
            inputs = exportable.graph_inputs(predictor.task.collate(test[:size]))
            times: dict[str, list[float]] = {name: [] for name in sides}
            with torch.no_grad():
                for _ in range(3):  # warm-up
                    for function in sides.values():
                        function(*inputs)
                for _ in range(args.repeats):
                    for name, function in sides.items():
                        times[name].append(timed(function, inputs))
            ms = {name: statistics.median(values) for name, values in times.items()}
            a, b = ms["eager"], ms["onnx"]
            row = f"{size:5d}  {inputs[0].numel():6d}  {a:8.2f}  {b:14.2f}  {b / a:12.2f}"
            if args.int8:  # each round's int8 ÷ float32, paired: a load change hits both
                paired = statistics.median(
                    q / f for q, f in zip(times["int8"], times["onnx"], strict=True)
                )
                row += f"  {ms['int8']:7.2f}  {paired:11.2f}"
            print(row)
        if args.int8:
            for split in ("dev", "test"):
                scores = {
                    name: onnx_score(predictor.task, model, exportable, Path(folder) / file, split)
                    for name, file in (("float32", "model.onnx"), ("int8", "int8.onnx"))
                }
                metric = main_metric(scores["float32"])
                float32, int8 = scores["float32"][metric], scores["int8"][metric]
                change = -drop(metric, float32, int8)
                print(
                    f"{split} {metric}: float32 {float32:.4f}, int8 {int8:.4f} "
                    f"({round(change, 2) + 0.0:+.2f} {'%' if metric == 'rmse' else 'points'})"
                )


if __name__ == "__main__":
    main()
