"""Time and peak memory of selfattn's attention against PyTorch's own, ours ÷ reference.

Three tables, each for the forward pass (under ``torch.no_grad``) and forward+backward:

1. ``fused``: :func:`selfattn.attention` with its defaults (scaled dot product + softmax, no
   weights, so it dispatches to SDPA) ÷ ``F.scaled_dot_product_attention`` on the same
   ``(B, H, L, D)`` tensors; ``causal=True`` ÷ ``is_causal=True``; and
   ``key_padding_mask=pad`` ÷ SDPA with the equivalent boolean mask (sequence b of the
   batch padded in its last b·L/(2B) positions), which measures what zeroing the padded
   keys and values costs.
2. ``mha``: ``MultiHeadAttention.from_torch(m)`` ÷ ``m``, a
   ``torch.nn.MultiheadAttention(E, H, batch_first=True)`` called with
   ``need_weights=False`` (E = H·D). Both modules are in eval mode, so in the forward table
   torch takes its native "fast path" (``torch._native_multi_head_attention``).
3. ``eager``: the variants SDPA cannot run, which selfattn computes one block of queries at
   a time (with activation checkpointing under autograd) ÷ the naive eager formula that
   materialises every score at once, e.g. ``relu(q @ kᵀ · scale) @ v``: normaliser relu,
   normaliser sigmoid, ``need_weights=True`` with softmax, and the additive score, whose
   naive form builds the ``(B, H, L, L, hidden)`` pair tensor (so it runs on a smaller
   configuration, capped in L; see ``--additive-*``).

Method:

* time: median wall-clock of several calls after warm-up (a tiny-shape call through the
  same code paths, then one full-size call, which is not counted: the first call at a large
  size in a fresh process is up to 2× slower, mostly page faults); ours and the reference
  run interleaved (alternating order) in one process on the same inputs, so machine noise
  hits both. With no ``--repeats`` the count adapts to ~3 s per row (at least 1).
  ``--repeats 1`` skips the full-size warm-up and times the first call (a smoke check).
  Rows timed while other processes used the CPU are marked ``noisy``.
* peak memory on CPU: each (variant, role, L, mode) runs once in a fresh process forked
  from a forkserver with torch already imported. After the inputs exist and a tiny-shape
  call has initialised kernels and threads, the process's high-water mark is reset to its
  current RSS (``/proc/self/clear_refs``); the peak is ``VmHWM`` after the call minus
  ``VmRSS`` before it. Where clear_refs is unavailable the ``getrusage`` ``ru_maxrss``
  difference is used instead (it can only under-estimate). On CUDA the peak is
  ``torch.cuda.max_memory_allocated`` after ``reset_peak_memory_stats`` minus what was
  allocated before, measured in this process.
* guard: anything whose estimated footprint (full score/pair tensors) exceeds
  ``--mem-cap-gib`` is not run; a skipped naive reference still leaves our absolute numbers.

Usage::

    python benchmarks/attention.py                  # L = 256 … 8192, ~15-25 min on 2 CPU cores
    python benchmarks/attention.py --quick          # L = 256 1024, 1 repeat: a smoke check
    python benchmarks/attention.py --lengths 1024 4096 --sections eager --repeats 3

Tables go to stdout, one progress line per measurement to stderr.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import ctypes.util
import functools
import gc
import multiprocessing as mp
import os
import resource
import signal
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

import selfattn
from selfattn import AdditiveScore, MultiHeadAttention
from selfattn.runtime import machine_busy_seconds

MiB = 1 << 20
GiB = 1 << 30
ROLES = ("ours", "ref")
SECTIONS = {
    "fused": ("softmax", "causal", "padding"),
    "mha": ("mha",),
    "eager": ("relu", "sigmoid", "weights", "additive"),
}
TITLES = {
    "fused": "1. selfattn.attention (fused path) ÷ F.scaled_dot_product_attention",
    "mha": "2. MultiHeadAttention.from_torch(m) ÷ nn.MultiheadAttention m (need_weights=False)",
    "eager": "3. selfattn.attention chunked eager path ÷ naive eager formula (full L×L)",
}
LABELS = {
    "softmax": "softmax",
    "causal": "causal",
    "padding": "padding",
    "mha": "mha E=H·D",
    "relu": "relu",
    "sigmoid": "sigmoid",
    "weights": "need_weights",
    "additive": "additive",
}
TINY = 32  # sequence length of the warm-up call that initialises kernels and threads
AUTO_BUDGET_S = 3.0  # time per row (both roles) that the automatic repeat count aims for
AUTO_MAX_REPEATS = 15
FOREIGN_LOAD_NOTE = 0.3  # cores used by other processes while timing that earn a note


@dataclass(frozen=True)
class Case:
    """One row of a table: a variant at one length, forward or forward+backward."""

    section: str
    variant: str
    length: int
    backward: bool
    batch: int
    heads: int
    head_dim: int
    device: str
    threads: int

    @property
    def mode(self) -> str:
        return "fwd+bwd" if self.backward else "fwd"


# --------------------------------------------------------------------------- workloads


@dataclass
class Setup:
    """Inputs and modules shared by both roles of a case (built from fixed seeds)."""

    tensors: tuple[Tensor, ...]
    grad_out: Tensor | None
    leaves: list[Tensor]
    torch_mha: nn.MultiheadAttention | None = None
    our_mha: MultiHeadAttention | None = None
    additive: AdditiveScore | None = None
    padding: Tensor | None = None  # (B, L), True at padding


def build(case: Case, length: int) -> Setup:
    """Inputs of ``case`` at ``length``: the same values in every process."""
    device = torch.device(case.device)
    gen = torch.Generator().manual_seed(0)
    b, h, d = case.batch, case.heads, case.head_dim
    grad = case.backward

    def randn(*shape: int) -> Tensor:
        return torch.randn(*shape, generator=gen).to(device).requires_grad_(grad)

    setup: Setup
    if case.variant == "mha":
        x = randn(b, length, h * d)
        torch.manual_seed(1)
        ref = nn.MultiheadAttention(h * d, h, batch_first=True).to(device).eval()
        ours = MultiHeadAttention.from_torch(ref).eval()
        params = [*ref.parameters(), *ours.parameters()]
        for p in params:
            p.requires_grad_(grad)
        setup = Setup((x,), None, [x, *params], torch_mha=ref, our_mha=ours)
        out_shape: tuple[int, ...] = (b, length, h * d)
    else:
        q, k, v = randn(b, h, length, d), randn(b, h, length, d), randn(b, h, length, d)
        setup = Setup((q, k, v), None, [q, k, v])
        if case.variant == "padding":
            real = length - torch.arange(b) * length // (2 * b)  # every row keeps ≥ L/2 keys
            setup.padding = (torch.arange(length)[None, :] >= real[:, None]).to(device)
        if case.variant == "additive":
            torch.manual_seed(1)
            setup.additive = AdditiveScore(d).to(device)
            setup.additive.requires_grad_(grad)
            setup.leaves += list(setup.additive.parameters())
        out_shape = (b, h, length, d)
    if grad:
        setup.grad_out = torch.randn(*out_shape, generator=gen).to(device)
    return setup


def _naive(normalizer: Callable[[Tensor], Tensor]) -> Callable[..., tuple[Tensor, Tensor]]:
    def run(q: Tensor, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        weights = normalizer((q @ k.transpose(-2, -1)) * q.shape[-1] ** -0.5)
        return weights @ v, weights

    return run


def _softmax(t: Tensor) -> Tensor:
    return torch.softmax(t, dim=-1)


def functions(
    case: Case, setup: Setup, chunk_size: int | None = None
) -> dict[str, Callable[..., Any]]:
    """``{"ours": f, "ref": g}``; each maps the setup's tensors to output or (output, …).

    ``chunk_size`` reaches selfattn's eager path only; the warm-up uses a small one so that
    its tiny input goes through the same blocked, checkpointed code as the real call.
    """
    attn = functools.partial(selfattn.attention, chunk_size=chunk_size)
    sdpa = F.scaled_dot_product_attention
    variant = case.variant
    if variant == "softmax":
        return {"ours": lambda q, k, v: attn(q, k, v)[0], "ref": sdpa}
    if variant == "causal":
        return {
            "ours": lambda q, k, v: attn(q, k, v, causal=True)[0],
            "ref": lambda q, k, v: sdpa(q, k, v, is_causal=True),
        }
    if variant == "padding":
        pad = setup.padding
        assert pad is not None
        allowed = ~pad[:, None, None, :]  # (B, 1, 1, S), True = may attend
        return {
            "ours": lambda q, k, v: attn(q, k, v, key_padding_mask=pad)[0],
            "ref": lambda q, k, v: sdpa(q, k, v, attn_mask=allowed),
        }
    if variant == "mha":
        ref, ours = setup.torch_mha, setup.our_mha
        assert ref is not None and ours is not None
        return {
            "ours": lambda x: ours(x)[0],
            "ref": lambda x: ref(x, x, x, need_weights=False)[0],
        }
    if variant in ("relu", "sigmoid"):
        act = torch.relu if variant == "relu" else torch.sigmoid
        return {"ours": lambda q, k, v: attn(q, k, v, normalizer=variant), "ref": _naive(act)}
    if variant == "weights":
        return {"ours": lambda q, k, v: attn(q, k, v, need_weights=True), "ref": _naive(_softmax)}
    if variant == "additive":
        mod = setup.additive
        assert mod is not None

        def naive_additive(q: Tensor, k: Tensor, v: Tensor) -> Tensor:
            pair = torch.tanh(mod.q_proj(q).unsqueeze(-2) + mod.k_proj(k).unsqueeze(-3))
            return torch.softmax(mod.w(pair).squeeze(-1), dim=-1) @ v  # (B, H, L, L, hidden)

        return {"ours": lambda q, k, v: attn(q, k, v, score=mod)[0], "ref": naive_additive}
    raise ValueError(f"unknown variant {variant!r}")


def make_call(
    case: Case, setup: Setup, role: str, chunk_size: int | None = None
) -> Callable[[], Any]:
    """One forward (no grad) or forward+backward; returns what the call produced."""
    fn = functions(case, setup, chunk_size)[role]
    cuda = case.device.startswith("cuda")

    def call() -> Any:
        if case.backward:
            for t in setup.leaves:
                t.grad = None
            result = fn(*setup.tensors)
            out = result[0] if isinstance(result, tuple) else result
            out.backward(setup.grad_out)
        else:
            with torch.no_grad():
                result = fn(*setup.tensors)
        if cuda:
            torch.cuda.synchronize()
        return result

    return call


def estimate_bytes(case: Case, role: str) -> int:
    """Rough peak of the tensors that grow as L² (the rest is O(L) and ignored)."""
    scores = case.batch * case.heads * case.length**2 * 4  # one fp32 (B, H, L, L)
    if role == "ref":
        if case.variant in ("relu", "sigmoid", "weights"):
            # forward: scores and normalised weights; backward adds their two gradients
            return (3 if case.backward else 2) * scores
        if case.variant == "additive":
            # pair tensors (B, H, L, L, hidden), plus the scores and their softmax
            return ((3 if case.backward else 2) * case.head_dim + 2) * scores
        if case.variant == "mha" and case.device == "cpu" and not case.backward:
            return scores  # torch's CPU fast path (eval, no grad) materialises the scores
        return 0
    if case.variant == "weights":  # the per-block weights and their concatenation
        return 2 * scores
    return 0  # SDPA, or blocks bounded by selfattn's CHUNK_BUDGET


# --------------------------------------------------------------------------- measurements


def _prepare(case: Case) -> None:
    torch.set_num_threads(case.threads)
    torch.backends.cudnn.benchmark = False


def _warm_up(case: Case, roles: tuple[str, ...]) -> None:
    """Run every role once on a tiny input: loads kernels, starts the thread pool."""
    tiny = replace(case, length=min(case.length, TINY))
    setup = build(tiny, tiny.length)
    for role in roles:
        make_call(tiny, setup, role, chunk_size=max(1, tiny.length // 4))()


def time_task(case: Case, roles: tuple[str, ...], repeats: int | None) -> dict[str, Any]:
    """Median seconds per call of each role, interleaved on shared inputs."""
    _prepare(case)
    _warm_up(case, roles)
    setup = build(case, case.length)
    calls = {role: make_call(case, setup, role) for role in roles}
    samples: dict[str, list[float]] = {role: [] for role in roles}

    def once(order: tuple[str, ...]) -> dict[str, float]:
        took = {}
        for role in order:
            start = time.perf_counter()
            calls[role]()
            took[role] = time.perf_counter() - start
        return took

    busy_before, cpu_before, wall_before = machine_busy_seconds(), _own_cpu_seconds(), time.time()
    first = once(roles)  # full-size warm-up
    if repeats == 1:
        for role in roles:
            samples[role].append(first[role])
    if repeats is None:
        repeats = round(AUTO_BUDGET_S / sum(first.values()))
        repeats = max(1, min(AUTO_MAX_REPEATS, repeats))
    for i in range(repeats - len(samples[roles[0]])):
        took = once(roles if i % 2 else roles[::-1])
        for role in roles:
            samples[role].append(took[role])
    wall = time.time() - wall_before
    foreign = machine_busy_seconds() - busy_before - (_own_cpu_seconds() - cpu_before)
    return {
        "seconds": {role: statistics.median(s) for role, s in samples.items()},
        "n": len(samples[roles[0]]),
        "foreign_cores": foreign / wall if wall > 0.05 else None,
    }


def _own_cpu_seconds() -> float:
    t = os.times()
    return t.user + t.system


def _libc_trim() -> None:
    """Give freed heap pages back to the OS so the measured call must fault its own in."""
    name = ctypes.util.find_library("c")
    if name:
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(name).malloc_trim(0)


def _status_bytes(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise KeyError(field)


def _reset_high_water_mark() -> bool:
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return _status_bytes("VmHWM") <= _status_bytes("VmRSS") + MiB
    except OSError:
        return False


def memory_task(case: Case, role: str) -> dict[str, Any]:
    """Peak memory added by one call of ``role``, in a process of its own (CPU)."""
    _prepare(case)
    _warm_up(case, (role,))
    setup = build(case, case.length)
    call = make_call(case, setup, role)
    if case.device.startswith("cuda"):
        gc.collect()
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
        start = time.perf_counter()
        result = call()
        took = time.perf_counter() - start
        peak = torch.cuda.max_memory_allocated() - base
        del result
        return {"bytes": peak, "seconds": took, "method": "cuda max_memory_allocated"}
    gc.collect()
    _libc_trim()
    rss_before = _status_bytes("VmRSS")
    exact = _reset_high_water_mark()
    maxrss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    start = time.perf_counter()
    result = call()
    took = time.perf_counter() - start
    if exact:
        peak, method = _status_bytes("VmHWM") - rss_before, "VmHWM - VmRSS (clear_refs)"
    else:
        maxrss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        peak, method = maxrss - maxrss_before, "ru_maxrss difference"
    del result
    return {"bytes": max(peak, 0), "seconds": took, "method": method}


def _child(conn: Any, fn: Callable[..., dict[str, Any]], args: tuple[Any, ...]) -> None:
    try:
        conn.send(fn(*args))
    except BaseException as e:  # report it (RuntimeError for an allocator failure, …)
        conn.send({"error": f"{type(e).__name__}: {str(e).splitlines()[0][:120]}"})
    finally:
        conn.close()


class Runner:
    """Runs a measurement in a fresh forked process (CPU) or in this process (CUDA)."""

    def __init__(self, in_process: bool) -> None:
        self.in_process = in_process
        self.ctx = None if in_process else mp.get_context("forkserver")
        if self.ctx is not None:
            # Children fork from a server that has already imported all this (checkpoint's
            # first call imports torch._dynamo), so each starts in milliseconds. '__main__'
            # is re-run in each child, which is cheap once these are loaded.
            self.ctx.set_forkserver_preload(
                ["torch", "torch._dynamo", "torch.utils.checkpoint", "selfattn"]
            )

    def __call__(self, fn: Callable[..., dict[str, Any]], *args: Any) -> dict[str, Any]:
        if self.ctx is None:
            try:
                return fn(*args)
            except RuntimeError as e:  # CUDA out of memory
                torch.cuda.empty_cache()
                return {"error": f"{type(e).__name__}: {str(e).splitlines()[0][:120]}"}
        receive, send = self.ctx.Pipe(duplex=False)
        proc = self.ctx.Process(target=_child, args=(send, fn, args))
        proc.start()
        send.close()
        result = None
        try:
            result = receive.recv()
        except EOFError:
            result = None
        finally:  # interrupted (Ctrl-C, SIGTERM): take the worker down with us
            if proc.is_alive() and result is None:
                proc.kill()
        proc.join()
        if result is None:
            return {"error": f"worker died (exit code {proc.exitcode}; out of memory?)"}
        return result


# --------------------------------------------------------------------------- report


def _ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1e3:.1f}"


def _mib(nbytes: int | None) -> str:
    return "-" if nbytes is None else f"{nbytes / MiB:.1f}"


def _ratio(ours: float | None, ref: float | None, floor: float = 0.0) -> str:
    if ours is None or ref is None or ref <= floor:
        return "-"
    return f"{ours / ref:.2f}"


HEADER = (
    f"{'variant':<13}{'L':>6}  {'ours ms':>10}{'ref ms':>10}{'time ×':>8}  "
    f"{'ours MiB':>10}{'ref MiB':>10}{'mem ×':>8}  {'n':>3}  note"
)


def run_row(
    case: Case, run: Runner, args: argparse.Namespace, progress: Callable[..., None]
) -> tuple[str, str | None]:
    """Measure one row (three progress steps); return it formatted, and the memory method."""
    cap = args.mem_cap_gib * GiB
    need = {role: estimate_bytes(case, role) for role in ROLES}
    roles = tuple(role for role in ROLES if need[role] <= cap)
    name = f"{case.section} {case.variant} L={case.length} {case.mode}"
    notes = []
    if "ours" not in roles:
        notes.append(f"skipped: would need {max(need.values()) / GiB:.1f} GiB")
        progress(f"{name}: {notes[0]}", steps=1 + len(ROLES))
        return _format(case, {}, {}, 0, notes), None
    if "ref" not in roles:
        ref_name = "naive" if case.section == "eager" else "reference"
        notes.append(f"{ref_name} OOM-skipped (would need {need['ref'] / GiB:.1f} GiB)")

    progress(f"{name}: timing {' + '.join(roles)}")
    timing = run(time_task, case, roles, args.repeats)
    seconds: dict[str, float] = {}
    n = 0
    if "error" in timing:
        notes.append(f"timing failed: {timing['error']}")
    else:
        seconds, n = timing["seconds"], timing["n"]
        foreign = timing["foreign_cores"]
        if foreign is not None and foreign > FOREIGN_LOAD_NOTE:
            notes.append(f"noisy: other processes used {foreign:.1f} cores while timing")
    peaks: dict[str, int] = {}
    method = None
    for role in ROLES:
        if role not in roles:
            progress(f"{name}: {role} memory skipped")
            continue
        progress(f"{name}: {role} memory")
        mem = run(memory_task, case, role)
        if "error" in mem:
            notes.append(f"{role} memory failed: {mem['error']}")
        else:
            peaks[role], method = mem["bytes"], mem["method"]
    return _format(case, seconds, peaks, n, notes), method


def _format(
    case: Case, seconds: dict[str, float], peaks: dict[str, int], n: int, notes: list[str]
) -> str:
    return (
        f"{LABELS[case.variant]:<13}{case.length:>6}  "
        f"{_ms(seconds.get('ours')):>10}{_ms(seconds.get('ref')):>10}"
        f"{_ratio(seconds.get('ours'), seconds.get('ref')):>8}  "
        f"{_mib(peaks.get('ours')):>10}{_mib(peaks.get('ref')):>10}"
        f"{_ratio(peaks.get('ours'), peaks.get('ref'), floor=MiB):>8}  "
        f"{n or '-':>3}  {'; '.join(notes)}"
    ).rstrip()


def plan(args: argparse.Namespace) -> list[Case]:
    cases = []
    for section in args.sections:
        for backward in (False, True):
            for variant in SECTIONS[section]:
                for length in args.lengths:
                    config = (args.batch, args.heads, args.head_dim)
                    if variant == "additive":
                        if length > args.additive_max_len:
                            continue
                        config = (args.additive_batch, args.additive_heads, args.head_dim)
                    b, h, d = config
                    cases.append(
                        Case(section, variant, length, backward, b, h, d, args.device, args.threads)
                    )
    return cases


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--lengths", type=int, nargs="+", default=[256, 512, 1024, 2048, 4096, 8192])
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--heads", type=int, default=8)
    p.add_argument("--head-dim", type=int, default=64)
    p.add_argument(
        "--repeats",
        type=int,
        default=None,
        help="timed calls per row (median); default: adapt to ~3 s per row, at most 15. "
        "With 1, the first full-size call is the sample (only a tiny-shape warm-up)",
    )
    p.add_argument("--quick", action="store_true", help="L = 256 1024 and 1 repeat (smoke check)")
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    p.add_argument("--threads", type=int, default=torch.get_num_threads())
    p.add_argument("--sections", nargs="+", choices=list(SECTIONS), default=list(SECTIONS))
    p.add_argument(
        "--mem-cap-gib",
        type=float,
        default=12.0,
        help="skip any call whose estimated L²-sized tensors exceed this (default 12)",
    )
    p.add_argument("--additive-batch", type=int, default=1)
    p.add_argument("--additive-heads", type=int, default=4)
    p.add_argument(
        "--additive-max-len", type=int, default=None, help="default 2048 (256 with --quick)"
    )
    args = p.parse_args(argv)
    if args.quick:
        args.lengths = [256, 1024]
        args.repeats = 1 if args.repeats is None else args.repeats
    if args.additive_max_len is None:
        args.additive_max_len = 256 if args.quick else 2048
    if args.device == "cuda" and not torch.cuda.is_available():
        p.error("--device cuda: no CUDA device available")
    if args.repeats is not None and args.repeats < 1:
        p.error("--repeats must be >= 1")
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # run cleanup, stop the worker
    cuda = args.device == "cuda"
    run = Runner(in_process=cuda)
    cases = plan(args)
    total = sum(1 + len(ROLES) for _ in cases)
    done = 0
    started = time.perf_counter()

    def progress(message: str, steps: int = 1) -> None:
        nonlocal done
        done += steps
        elapsed = time.perf_counter() - started
        print(f"[{done:>3}/{total}] {elapsed:6.0f}s  {message}", file=sys.stderr, flush=True)

    device_name = torch.cuda.get_device_name() if cuda else torch.backends.cpu.get_cpu_capability()
    print(
        f"selfattn {selfattn.__version__}, torch {torch.__version__}, {args.device} "
        f"({device_name}), {args.threads} threads, fp32; default B={args.batch} "
        f"H={args.heads} D={args.head_dim}; additive B={args.additive_batch} "
        f"H={args.additive_heads} D=hidden={args.head_dim}, L ≤ {args.additive_max_len}"
    )
    print("ratios are ours ÷ reference (< 1: ours faster / smaller); n = timed calls (median)")
    peak_how = (
        "cuda max_memory_allocated above the allocated baseline"
        if cuda
        else "peak RSS increase during one call, fresh forked process per measurement"
    )
    print(f"memory: {peak_how}; mem × is '-' when the reference peak is under 1 MiB")
    previous = None
    methods: set[str | None] = set()
    for case in cases:
        table = (case.section, case.backward)
        if table != previous:
            print(f"\n== {TITLES[case.section]} — {case.mode} ==")
            if case.section == "eager":
                print(
                    "   (additive: its own smaller B, H and capped L, see header; naive "
                    "materialises (B, H, L, L, hidden))"
                )
            print(HEADER)
            previous = table
        line, method = run_row(case, run, args, progress)
        methods.add(method)
        print(line, flush=True)
    for method in sorted(m for m in methods if m):
        print(f"\npeak memory method: {method}")
    print(f"total time {time.perf_counter() - started:.0f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
