"""Where an ONNX file's time goes in ONNX Runtime: the kernels' time by operator, from
ONNX Runtime's own profile (one thread), and the share in the operators int8 weights
replace (for ``export_latency.py --profile``)."""

from __future__ import annotations

import collections
import json
import statistics
import tempfile
from pathlib import Path
from typing import Any

from torch import Tensor

from selfattn.export.wrapper import Exportable

#: Operators that multiply by, or look up in, a stored weight (when one input is a weight):
#: what int8 replaces, and what replaces it.
WEIGHT_OPS = {"MatMul", "Gemm", "FusedMatMul", "Gather"}
INT8_OPS = {
    "MatMulInteger",
    "DynamicQuantizeMatMul",
    "MatMulIntegerToFloat",
    "DynamicQuantizeLinear",
    "DequantizeLinear",
    "QuantizeLinear",
}

#: Profiled calls after 5 warm-up ones; each node's time is its fastest of these (on a
#: shared machine the slower ones include waiting for a core).
CALLS = 30


def kernel_profile(
    files: dict[str, Path], inputs: tuple[Tensor, ...], exportable: Exportable
) -> dict[str, Any]:
    """For each file: the sum over its nodes of each node's fastest kernel time (ms), the
    call's median time as ONNX Runtime saw it (``run_ms``: the kernels and what lies
    between them), the milliseconds by operator, and ``weight_share``: the share of the
    kernel time in weight products and lookups (float32) or in int8's products, lookups and
    (de)quantisation (int8)."""
    import onnx
    import onnxruntime

    feed = {spec.name: value.numpy() for spec, value in zip(exportable.inputs, inputs, strict=True)}
    found: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as folder:
        for name, path in files.items():
            options = onnxruntime.SessionOptions()
            options.intra_op_num_threads = options.inter_op_num_threads = 1
            options.optimized_model_filepath = str(Path(folder) / f"{name}.optimized.onnx")
            options.enable_profiling = True
            options.profile_file_prefix = str(Path(folder) / name)
            session = onnxruntime.InferenceSession(
                str(path), options, providers=["CPUExecutionProvider"]
            )
            for _ in range(5 + CALLS):
                session.run(None, feed)
            events = json.loads(Path(session.end_profiling()).read_text(encoding="utf-8"))
            graph = onnx.load(options.optimized_model_filepath).graph
            weights = {init.name for init in graph.initializer}
            weighted = {
                node.name
                for node in graph.node
                if node.op_type in INT8_OPS
                or (node.op_type in WEIGHT_OPS and any(i in weights for i in node.input))
            }
            times: dict[str, list[float]] = collections.defaultdict(list)
            operator: dict[str, str] = {}
            runs = [e["dur"] for e in events if e.get("name") == "model_run"][5:]
            for event in events:
                if event.get("cat") == "Node" and event["name"].endswith("_kernel_time"):
                    node = event["name"].removesuffix("_kernel_time")
                    times[node].append(event["dur"])
                    operator[node] = event["args"]["op_name"]
            medians = {node: min(values[5:]) / 1000 for node, values in times.items()}
            by_op: collections.Counter[str] = collections.Counter()
            for node, ms in medians.items():
                by_op[operator[node]] += ms
            total = sum(medians.values())
            found[name] = {
                "kernel_ms": total,
                "run_ms": statistics.median(runs) / 1000,
                "nodes": len(medians),
                "weight_share": sum(ms for n, ms in medians.items() if n in weighted) / total,
                "ops_ms": dict(by_op.most_common()),
            }
    return found
