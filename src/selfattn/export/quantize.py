"""int8 weights for an ONNX export: ONNX Runtime's dynamic quantisation, kept only when it
costs at most :data:`MAX_DROP` points of the run's main dev metric.

The float32 export is written (and checked against PyTorch) in a scratch folder, then
``onnxruntime.quantization.quantize_dynamic`` stores every matrix product's weight as int8
with one scale per output channel (activations are quantised to uint8 per call, at run
time) and the embedding tables as uint8. One scale per tensor (its default) broke a
fine-tuned DistilBERT — its int8 logits agreed with float32's argmax on a quarter of the
dev sentences — where one per channel kept the accuracy, and the small from-scratch models
scored and ran the same either way (``benchmarks/export_latency.py --per-tensor``).
Convolutions (a tagger's character CNN) stay float32: ONNX Runtime's ConvInteger made the
pos tagger slower than float32 at batch 32 (``benchmarks/export_latency.py --ops``). Both
files are then scored on the run's dev split through
ONNX Runtime — the same scoring as ``selfattn eval``, with the model's forward pass
answered by the file — and the int8 file is moved to the output path only if its score is
close enough; otherwise nothing is written there.

Other ways were measured on the sentiment classifier and the pos tagger (one thread, CPU
time per call) and were no faster at batch 1 or 32: static QDQ quantisation calibrated on
training batches (slower: a QuantizeLinear / DequantizeLinear pair around every product),
quantising the attention's own products too (``MatMulConstBOnly`` off), and quantising the
graph ONNX Runtime had already optimised; ``onnxruntime.transformers``' optimizer finds
none of its Attention, SkipLayerNormalization or EmbedLayerNormalization patterns in the
dynamo exporter's graph. At width 128 most of the time is in operators int8 weights leave
float32 (``benchmarks/export_latency.py --profile``).

PyTorch's own dynamic quantisation (``torch.ao.quantization.quantize_dynamic``) gives
modules that neither ONNX exporter can write (``torch.export`` fails on their packed
weights), so the int8 file is made from the float32 ONNX graph.
"""

from __future__ import annotations

import contextlib
import json
import logging
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from torch import Tensor, nn

from selfattn.export.exporters import export_run, exportable_of, onnx_runner, quiet
from selfattn.export.wrapper import Exportable

#: The operators whose weights become 8-bit (not Conv: see above).
QUANTIZED_OPS = ("MatMul", "Gemm", "Gather")

#: What ``selfattn export --quantize`` accepts.
QUANTIZATIONS = ("int8",)

#: The most the int8 file may lose: points of accuracy or set F1 (percentage points), or
#: percent of float32's RMSE for a regression.
MAX_DROP = 0.5


def check_quantize(quantize: str, fmt: str) -> None:
    """Refuse in one line a ``--quantize`` value other than int8, or with a format other
    than onnx."""
    if quantize not in QUANTIZATIONS:
        raise ValueError(
            f"unknown --quantize {quantize!r}; choose {', '.join(QUANTIZATIONS)} "
            "(or leave it out for float32)"
        )
    if fmt != "onnx":
        raise ValueError(
            f"--quantize {quantize} is for --format onnx (ONNX Runtime's int8 kernels), not {fmt}"
        )


def quantize_int8(
    source: Path,
    target: Path,
    ops: tuple[str, ...] = QUANTIZED_OPS,
    *,
    per_channel: bool = True,
) -> None:
    """ONNX Runtime's dynamic quantisation of ``source`` into ``target``: int8 weights
    (one scale per output channel, or per tensor) for every matrix product, uint8
    embedding tables (``ops``: :data:`QUANTIZED_OPS`)."""
    try:
        from onnxruntime.quantization import QuantType, quantize_dynamic
    except ImportError:
        raise ValueError("--quantize int8 needs onnxruntime: pip install onnxruntime") from None
    disabled = logging.root.manager.disable
    logging.disable(logging.WARNING)  # its advice to pre-process the graph, on the root log
    try:
        with quiet():
            quantize_dynamic(
                source,
                target,
                weight_type=QuantType.QInt8,
                op_types_to_quantize=list(ops),
                per_channel=per_channel,
            )
    finally:
        logging.disable(disabled)


@contextlib.contextmanager
def forward_through(
    model: nn.Module, exportable: Exportable, run: Callable[..., Tensor]
) -> Iterator[None]:
    """``model``'s forward pass answered by ``run`` (an exported file of it) while in the
    block: the tensors of each batch in, the file's logits out."""

    def forward(batch: Any) -> Tensor:
        return run(*exportable.graph_inputs(batch))

    model.forward = forward
    try:
        yield
    finally:
        del model.forward


def main_metric(metrics: dict[str, float]) -> str:
    """The score that chooses a run's best epoch: a label set's F1, else accuracy, else
    (regression) RMSE."""
    return next(name for name in ("set_f1", "accuracy", "rmse") if name in metrics)


def drop(metric: str, float32: float, int8: float) -> float:
    """What int8 loses against float32 (negative: it gains): points of accuracy or F1,
    percent of the RMSE."""
    if metric == "rmse":
        return 100 * (int8 - float32) / float32 if float32 > 0 else 100 * int8
    return 100 * (float32 - int8)


def onnx_score(
    task: Any, model: nn.Module, exportable: Exportable, path: Path, split: str = "dev"
) -> dict[str, float]:
    """The metrics on ``split`` of the ONNX file ``path`` of ``model``, scored as
    ``selfattn eval`` scores the model."""
    run, _ = onnx_runner(exportable, path)
    try:
        with forward_through(model, exportable, run):
            return task.score(model, split)
    except ValueError:
        raise
    except Exception as error:  # onnxruntime's errors: say its first words
        first = " ".join(str(error).split())[:300]
        raise ValueError(f"scoring {path.name} on the {split} split failed: {first}") from None


def megabytes(path: Path) -> str:
    """``1.6 MB``, or below a megabyte ``0.21 MB``."""
    size = path.stat().st_size / 1e6
    return f"{size:.1f} MB" if size >= 1 else f"{size:.2f} MB"


def export_int8(model: nn.Module, task: Any, max_len: int, path: Path) -> str:
    """Export ``model`` as ONNX with int8 weights to ``path`` (and ``PATH.json``) if its dev
    score is within :data:`MAX_DROP` of float32's; returns the one-line summary.

    Raises:
        ValueError: what :func:`~selfattn.export.exporters.export_run` refuses, a run
            without a dev split, or an int8 file that loses more than :data:`MAX_DROP`
            (then nothing is written at ``path``).
    """
    with tempfile.TemporaryDirectory(prefix="selfattn-int8-") as scratch:
        float_path, int8_path = Path(scratch) / "float32.onnx", Path(scratch) / "int8.onnx"
        export_run(model, task, max_len, "onnx", float_path)
        quantize_int8(float_path, int8_path)
        exportable = exportable_of(model, task)  # type: ignore[arg-type]
        scores = {
            name: onnx_score(task, model, exportable, file)
            for name, file in (("float32", float_path), ("int8", int8_path))
        }
        metric = main_metric(scores["float32"])
        float32, int8 = scores["float32"][metric], scores["int8"][metric]
        lost = drop(metric, float32, int8)
        unit = "% of its RMSE" if metric == "rmse" else " points"
        compared = f"dev {metric} int8 {int8:.4f}, float32 {float32:.4f}"
        if not lost <= MAX_DROP:  # NaN is refused too
            raise ValueError(
                f"int8 weights cost {lost:.2f}{unit} ({compared}; at most {MAX_DROP:g} is "
                f"kept): {path} not written; export without --quantize for float32"
            )
        info = json.loads(Path(f"{float_path}.json").read_text(encoding="utf-8"))
        sizes = megabytes(int8_path), megabytes(float_path)
        shutil.move(int8_path, path)
    info |= {
        "file": path.name,
        "weights": "int8",
        "quantization": {
            "method": "onnxruntime.quantization.quantize_dynamic",
            "weights": "int8, one scale per output channel (matrix products); uint8 (embeddings)",
            "activations": "uint8, quantised per call at run time",
            "dev": {"metric": metric, "float32": float32, "int8": int8},
        },
    }
    Path(f"{path}.json").write_text(json.dumps(info, indent=2, ensure_ascii=False) + "\n")
    inputs = ", ".join(spec.describe() for spec in exportable.inputs)
    return (
        f"wrote {path} (onnx, opset {info['opset']}, int8 weights: {sizes[0]}, "
        f"float32 {sizes[1]}): "
        f"{compared} ({round(-lost, 2) + 0.0:+.2f}{unit}; kept: within {MAX_DROP:g}); "
        f"inputs {inputs}; outputs {exportable.output.describe()}"
    )
