"""ONNX Runtime against PyTorch eager: the latency of one trained run's model.

Exports the run's model with ``selfattn export`` (checked against PyTorch to 1e-4), then
times both on the same batches of the run's own test sentences — batch 1 and batch 32,
interleaved (eager, ONNX, eager, ONNX …) so a busy machine slows both alike — and prints
the median milliseconds per batch and the ratio ONNX ÷ eager (below 1: ONNX Runtime is
faster). One thread for both unless ``--threads`` says otherwise.

Usage::

    python benchmarks/export_latency.py runs/sentiment_rt_minilm --threads 1

The run is any token or sequence run with an ONNX-exportable model (a model fine-tuned
from MiniLM included: then the batches are its wordpieces).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

from selfattn.export.exporters import onnx_runner
from selfattn.export.wrapper import Exportable, wrap
from selfattn.tasks import Predictor


def batch_inputs(predictor: Predictor, exportable: Exportable, size: int) -> tuple[Any, ...]:
    """The first ``size`` test examples as the exported graph's inputs."""
    examples = predictor.task.load_splits().test[:size]
    batch = predictor.task.collate(examples)
    values = {
        "padding_mask": batch.key_padding_mask,
        "token_ids": batch.token_ids,
        "char_ids": batch.char_ids,
        "features": batch.features,
    }
    if batch.subwords is not None:
        values |= {
            "input_ids": batch.subwords.input_ids,
            "attention_mask": batch.subwords.attention_mask,
            "first": batch.subwords.first,
        }
    return tuple(values[spec.name] for spec in exportable.inputs)


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
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    predictor = Predictor(args.run)
    model = predictor.model.eval()
    from selfattn.export.exporters import export_run

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "model.onnx"
        print(export_run(model, predictor.task, predictor.spec.max_len, "onnx", path))
        exportable = wrap(model)  # type: ignore[arg-type]
        run_onnx, _ = onnx_runner(exportable, path)
        print(f"{args.run}: {args.threads} thread(s), median of {args.repeats} calls")
        print("batch  tokens  eager ms  onnxruntime ms  onnx / eager")
        for size in (int(value) for value in args.batches.split(",")):
            inputs = batch_inputs(predictor, exportable, size)
            with torch.no_grad():
                for _ in range(3):  # warm-up
                    exportable.module(*inputs)
                    run_onnx(*inputs)
                eager, onnx = [], []
                for _ in range(args.repeats):
                    eager.append(timed(exportable.module, inputs))
                    onnx.append(timed(run_onnx, inputs))
            a, b = statistics.median(eager), statistics.median(onnx)
            print(f"{size:5d}  {inputs[0].numel():6d}  {a:8.2f}  {b:14.2f}  {b / a:12.2f}")


if __name__ == "__main__":
    main()
