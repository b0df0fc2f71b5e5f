"""``selfattn bench attention``: every attention variant against dense softmax attention.

The shape follows the speed/memory table of "Long Range Arena" (Tay et al. 2021, Table 2):
one row per variant, one column group per sequence length L, and each entry a ratio to
the dense reference measured in the same run on the same inputs — here PyTorch's fused
``scaled_dot_product_attention`` without a mask. For every (variant, L):

* forward and forward+backward time (median of ``repeats`` calls after a warm-up);
* forward and forward+backward peak memory (:func:`~selfattn.bench.memory.measure_memory`);
* the error against exact softmax attention on the same inputs: the relative Frobenius
  error ``‖out − ref‖ / ‖ref‖`` where ``ref`` is what the variant computes or approximates
  (:meth:`~selfattn.kernels.AttentionKernel.reference`: dense attention, restricted to
  the window for the window kernel, with shared query-keys for LSH).

Timings taken while other processes kept the CPU busy are flagged: on a small machine one
busy core slows every OpenMP kernel several-fold.
"""

from __future__ import annotations

import math
import os
import statistics
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from selfattn.bench.memory import measure_memory
from selfattn.kernels import KERNELS, AttentionKernel, build_kernel

__all__ = ["BenchRow", "bench_attention", "format_table", "plot_rows", "variant_kernel"]

#: Default lengths: the LRA table's 1K-4K and the issue's 8K-16K.
LENGTHS = (1024, 2048, 4096, 8192, 16384)


@dataclass
class BenchRow:
    """One variant at one length; times in seconds, memory in bytes, error relative."""

    variant: str
    length: int
    forward_s: float
    backward_s: float
    forward_peak: int
    backward_peak: int
    error: float
    noisy: bool = False
    ratios: dict[str, float] = field(default_factory=dict)


def variant_kernel(
    name: str, length: int, head_dim: int, window: int, **options: Any
) -> AttentionKernel:
    """The kernel benchmarked as ``name`` at length ``length``."""
    if name == "window":
        options.setdefault("window", window)
    return build_kernel(name, max_len=length, head_dim=head_dim, **options)


def _inputs(
    batch: int, heads: int, length: int, head_dim: int, device: torch.device, seed: int
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    generator = torch.Generator(device="cpu").manual_seed(seed)
    shape = (batch, heads, length, head_dim)
    q, k, v, grad = (torch.randn(shape, generator=generator).to(device) for _ in range(4))
    return q, k, v, grad


def _calls(
    kernel: AttentionKernel, q: Tensor, k: Tensor, v: Tensor, grad: Tensor
) -> tuple[Callable[[], Tensor], Callable[[], None]]:
    def forward() -> Tensor:
        with torch.no_grad():
            return kernel(q, k, v)[0]

    leaves = [t.detach().requires_grad_(True) for t in (q, k, v)]

    def backward() -> None:
        out, _ = kernel(*leaves)
        out.backward(grad)
        for leaf in leaves:
            leaf.grad = None
        kernel.zero_grad(set_to_none=True)

    return forward, backward


def _median_seconds(fn: Callable[[], Any], repeats: int, device: torch.device) -> float:
    def sync() -> None:
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    fn()  # warm-up (kernel selection, allocator)
    sync()
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        sync()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def _busy_cores() -> float:
    """Non-idle CPU seconds of the whole machine since boot (``/proc/stat``); NaN if absent."""
    try:
        with open("/proc/stat") as f:
            fields = [int(x) for x in f.readline().split()[1:]]
    except OSError:
        return math.nan
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def _own_seconds() -> float:
    times = os.times()
    return times.user + times.system


def relative_error(out: Tensor, ref: Tensor) -> float:
    """``‖out − ref‖ / ‖ref‖`` (Frobenius), in float64."""
    out, ref = out.double(), ref.double()
    return float((out - ref).norm() / ref.norm().clamp(min=1e-30))


def bench_attention(
    variants: Sequence[str] | None = None,
    lengths: Sequence[int] = LENGTHS,
    *,
    batch: int = 1,
    heads: int = 4,
    head_dim: int = 64,
    window: int = 256,
    repeats: int = 3,
    device: torch.device | str = "cpu",
    seed: int = 0,
    progress: Callable[[str], None] | None = None,
) -> list[BenchRow]:
    """Measure every variant (default: all of :data:`~selfattn.kernels.KERNELS`) at
    every length; ratios are to the ``dense`` kernel at the same length."""
    device = torch.device(device)
    names = list(variants or KERNELS)
    unknown = [name for name in names if name not in KERNELS]
    if unknown:
        raise ValueError(f"unknown attention variant(s) {unknown}; choose from {sorted(KERNELS)}")
    if "dense" in names:
        names.remove("dense")
    names.insert(0, "dense")
    rows: list[BenchRow] = []
    for length in lengths:
        q, k, v, grad = _inputs(batch, heads, length, head_dim, device, seed)
        dense_out: Tensor | None = None
        for name in names:
            if progress is not None:
                progress(f"{name} L={length}")
            kernel = variant_kernel(name, length, head_dim, window).to(device)
            forward, backward = _calls(kernel, q, k, v, grad)
            busy, own, wall = _busy_cores(), _own_seconds(), time.perf_counter()
            forward_s = _median_seconds(forward, repeats, device)
            backward_s = _median_seconds(backward, repeats, device)
            elapsed = time.perf_counter() - wall
            foreign = (_busy_cores() - busy) - (_own_seconds() - own)
            forward_report = measure_memory(forward, device)
            backward_report = measure_memory(backward, device)
            out = forward_report.result
            if name == "dense":
                dense_out, error = out, 0.0
            else:
                error = relative_error(out, _reference(kernel, q, k, v, dense_out))
            rows.append(
                BenchRow(
                    variant=name,
                    length=length,
                    forward_s=forward_s,
                    backward_s=backward_s,
                    forward_peak=forward_report.peak,
                    backward_peak=backward_report.peak,
                    error=error,
                    noisy=elapsed > 0.05 and foreign / elapsed > 0.5,
                )
            )
        dense = rows[-len(names)]
        for row in rows[-len(names) :]:
            row.ratios = {
                "forward_s": row.forward_s / dense.forward_s,
                "backward_s": row.backward_s / dense.backward_s,
                "forward_peak": row.forward_peak / max(dense.forward_peak, 1),
                "backward_peak": row.backward_peak / max(dense.backward_peak, 1),
            }
    return rows


def _reference(
    kernel: AttentionKernel, q: Tensor, k: Tensor, v: Tensor, dense: Tensor | None
) -> Tensor:
    """What ``kernel`` computes or approximates; the dense output when that is it."""
    plain = type(kernel).reference is AttentionKernel.reference
    if plain and dense is not None and kernel.reference_mask(1, 1, q.device) is None:
        return dense
    with torch.no_grad():
        return kernel.reference(q, k, v)


def _mib(nbytes: int) -> str:
    return f"{nbytes / 2**20:.1f}"


def format_table(rows: Iterable[BenchRow]) -> str:
    """A plain-text table: one line per (variant, L), absolute values and ratios."""
    header = (
        f"{'variant':<10}{'L':>7}{'fwd ms':>10}{'x dense':>9}{'f+b ms':>10}{'x dense':>9}"
        f"{'fwd MiB':>10}{'x dense':>9}{'f+b MiB':>10}{'x dense':>9}{'rel err':>10}"
    )
    lines = [header, "-" * len(header)]
    for row in rows:
        r = row.ratios
        lines.append(
            f"{row.variant:<10}{row.length:>7}"
            f"{row.forward_s * 1e3:>10.1f}{r['forward_s']:>9.3f}"
            f"{row.backward_s * 1e3:>10.1f}{r['backward_s']:>9.3f}"
            f"{_mib(row.forward_peak):>10}{r['forward_peak']:>9.3f}"
            f"{_mib(row.backward_peak):>10}{r['backward_peak']:>9.3f}"
            f"{row.error:>10.2e}" + ("  noisy" if row.noisy else "")
        )
    return "\n".join(lines)


def rows_by_variant(rows: Iterable[BenchRow]) -> dict[str, dict[str, dict[str, Any]]]:
    """The rows as one JSON-ready object, variant → L → its numbers: seconds forward and
    forward + backward, peaks in MiB, relative error and the ratios to dense."""
    found: dict[str, dict[str, dict[str, Any]]] = {}
    for row in rows:
        found.setdefault(row.variant, {})[str(row.length)] = {
            "forward_s": row.forward_s,
            "backward_s": row.backward_s,
            "forward_mib": row.forward_peak / 2**20,
            "backward_mib": row.backward_peak / 2**20,
            "error": row.error,
            "ratios": dict(row.ratios),
        }
    return found


def plot_rows(rows: Sequence[BenchRow], path: Path) -> Path:
    """Forward+backward time and peak memory against L, one line per variant (log-log)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    for name in dict.fromkeys(row.variant for row in rows):
        mine = [row for row in rows if row.variant == name]
        lengths = [row.length for row in mine]
        style = "k-o" if name == "dense" else "-o"
        left.plot(lengths, [row.backward_s * 1e3 for row in mine], style, label=name, ms=4)
        right.plot(lengths, [row.backward_peak / 2**20 for row in mine], style, label=name, ms=4)
    for axis, title in ((left, "forward+backward time (ms)"), (right, "peak memory (MiB)")):
        axis.set_xscale("log", base=2)
        axis.set_yscale("log")
        axis.set_xlabel("sequence length L")
        axis.set_title(title)
        axis.grid(True, which="both", alpha=0.3)
    right.legend(fontsize=8)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=120)
    plt.close(figure)
    return path
