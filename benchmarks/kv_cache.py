"""Autoregressive decoding with the KV cache against recomputing the prefix, and the speed
of greedy, beam and non-autoregressive decoding.

The model is a random ``Seq2SeqTransformer`` of a realistic translation size (defaults:
E=256, H=4, 3+3 layers, FFN 1024, vocabulary 8000, fp32, eval mode); sources are random
token sequences. Every decoder emits exactly ``--tokens`` tokens (``min_len = max_len``,
so EOS is banned until then and forced after: one more decoder call), so both paths do
the same work whatever the random weights prefer.

1. ``greedy(use_cache=True)`` ÷ ``greedy(use_cache=False)``: time per sentence of each,
   the ratio cached ÷ recompute (< 1: the cache is faster) and the speed-up (its inverse).
   Both paths must agree: same tokens, log-probs within float error (printed). The
   recomputing path re-runs the decoder over the whole prefix every step, and — as
   ``Seq2SeqTransformer.decode`` does for every position it is given — projects every
   position onto the vocabulary, so its cost grows with t² and includes t·V projections.
2. Sentences/s of greedy, beam search (``--beam-size``) and NAT (one decoder pass at the
   same output length) at each batch size, and each ÷ greedy.

Method: median wall-clock over ``--repeats`` calls after an untimed short warm-up; cached
and recompute calls alternate in one process on the same encoded batch, so machine noise
hits both. Rows timed while other processes used the CPU are marked ``noisy``. On a
shared 2-core machine, 2 threads are the worst case: every small kernel waits for the
thread on the busy core (measured: batch-1 cached greedy 7.3 s per sentence with 2 threads,
0.9 s with ``--threads 1``; the full run takes ~18 min instead of ~3). Ratios survive the
noise better than absolute times.

Usage::

    python benchmarks/kv_cache.py              # 128 tokens, batch 1 and 16, 2 threads
    python benchmarks/kv_cache.py --quick      # 32 tokens, 1 repeat: a smoke check (~15 s)
    python benchmarks/kv_cache.py --batches 1 4 --tokens 64 --threads 1
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable

import torch

from selfattn.decoding import DecodeResult, beam_search, greedy, non_autoregressive
from selfattn.models import StackConfig
from selfattn.models.seq2seq import NUM_SPECIALS, EncodedSource, Seq2SeqTransformer, decoder_like
from selfattn.runtime import machine_busy_seconds

FOREIGN_LOAD_NOTE = 0.3  # cores used by other processes above which a row is marked noisy
WARMUP_TOKENS = 8


def build_model(args: argparse.Namespace) -> Seq2SeqTransformer:
    """A random encoder–decoder of the benchmark's size, in eval mode."""
    torch.manual_seed(0)
    stack = StackConfig(
        args.embed_dim,
        args.num_heads,
        args.ffn_dim,
        num_layers=args.num_layers,
        positional="sinusoidal",
        max_len=max(args.tokens, args.source_len),
        norm_first=True,
    )
    return Seq2SeqTransformer(
        stack,
        decoder_like(stack),
        target_vocab_size=args.vocab,
        source_vocab_size=args.vocab,
        length_predictor=True,
    ).eval()


def encode(model: Seq2SeqTransformer, batch: int, length: int, vocab: int) -> EncodedSource:
    """A batch of random sources of ``length`` tokens, encoded."""
    generator = torch.Generator().manual_seed(batch)
    source = torch.randint(NUM_SPECIALS, vocab, (batch, length), generator=generator)
    with torch.no_grad():
        return model.encode(source, torch.zeros(batch, length, dtype=torch.bool))


def timed(
    calls: dict[str, Callable[[int], DecodeResult]], tokens: int, repeats: int
) -> tuple[dict[str, float], dict[str, DecodeResult], float]:
    """Median seconds per call of each entry at ``tokens`` tokens (alternating order), the
    last results, and the cores other processes used meanwhile.

    The untimed warm-up call generates only a few tokens: it exists to initialise kernels,
    threads and the allocator, and a full-length recomputing call would cost minutes.
    """
    for call in calls.values():
        call(min(tokens, WARMUP_TOKENS))
    results: dict[str, DecodeResult] = {}
    seconds: dict[str, list[float]] = {name: [] for name in calls}
    busy_before, cpu_before, wall_before = machine_busy_seconds(), _own_cpu(), time.time()
    for i in range(repeats):
        for name in list(calls)[:: -1 if i % 2 else 1]:
            start = time.perf_counter()
            results[name] = calls[name](tokens)
            seconds[name].append(time.perf_counter() - start)
    wall = time.time() - wall_before
    foreign = (machine_busy_seconds() - busy_before - (_own_cpu() - cpu_before)) / max(wall, 1e-9)
    return {name: statistics.median(v) for name, v in seconds.items()}, results, foreign


def cache_row(model: Seq2SeqTransformer, args: argparse.Namespace, batch: int) -> str:
    """Table 1: cached ÷ recomputing greedy decoding at one batch size."""
    encoded = encode(model, batch, args.source_len, args.vocab)

    def run(use_cache: bool) -> Callable[[int], DecodeResult]:
        return lambda n: greedy(model, encoded, max_len=n, min_len=n, use_cache=use_cache)

    calls = {"cached": run(True), "recompute": run(False)}
    seconds, results, foreign = timed(calls, args.tokens, args.repeats)
    cached, full = results["cached"], results["recompute"]
    same = cached.tokens == full.tokens
    gap = float((cached.step_log_probs - full.step_log_probs).abs().max())
    notes = [f"tokens {'equal' if same else 'DIFFER'}, max |Δ log p| = {gap:.1e}"]
    if foreign > FOREIGN_LOAD_NOTE:
        notes.append(f"noisy: other processes used {foreign:.1f} cores")
    per_cached, per_full = seconds["cached"] / batch, seconds["recompute"] / batch
    ratio = per_cached / per_full
    return (
        f"{batch:>5} {per_cached * 1e3:>13.1f} {per_full * 1e3:>15.1f} {ratio:>17.3f} "
        f"{1 / ratio:>9.1f}x  " + "; ".join(notes)
    )


def speed_rows(model: Seq2SeqTransformer, args: argparse.Namespace, batch: int) -> list[str]:
    """Table 2: sentences/s of greedy, beam and NAT at one batch size."""
    encoded = encode(model, batch, args.source_len, args.vocab)
    calls: dict[str, Callable[[int], DecodeResult]] = {
        "greedy": lambda n: greedy(model, encoded, max_len=n, min_len=n),
        f"beam {args.beam_size}": lambda n: beam_search(
            model, encoded, beam_size=args.beam_size, max_len=n, min_len=n
        ),
        "nat": lambda n: non_autoregressive(model, encoded, lengths=[n] * batch),
    }
    seconds, results, foreign = timed(calls, args.tokens, args.repeats)
    note = (
        f"  noisy: other processes used {foreign:.1f} cores" if foreign > FOREIGN_LOAD_NOTE else ""
    )
    rows = []
    for name, value in seconds.items():
        length = statistics.mean(results[name].lengths)
        rows.append(
            f"{batch:>5} {name:<8} {batch / value:>13.2f} {seconds['greedy'] / value:>12.2f} "
            f"{length:>11.0f}{note}"
        )
    return rows


def _own_cpu() -> float:
    t = os.times()
    return t.user + t.system


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batches", type=int, nargs="+", default=[1, 16])
    parser.add_argument("--tokens", type=int, default=128, help="tokens generated per sentence")
    parser.add_argument("--source-len", type=int, default=32)
    parser.add_argument("--embed-dim", type=int, default=256)
    parser.add_argument("--num-heads", type=int, default=4)
    parser.add_argument("--num-layers", type=int, default=3, help="encoder and decoder each")
    parser.add_argument("--ffn-dim", type=int, default=1024)
    parser.add_argument("--vocab", type=int, default=8000)
    parser.add_argument("--beam-size", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=3, help="timed calls per entry")
    parser.add_argument("--threads", type=int, default=2, help="torch intra-op threads")
    parser.add_argument("--quick", action="store_true", help="32 tokens, 1 repeat: a smoke check")
    args = parser.parse_args(argv)
    if args.quick:
        args.tokens, args.repeats = 32, 1
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    model = build_model(args)
    print(
        f"E={args.embed_dim} H={args.num_heads} layers={args.num_layers}+{args.num_layers} "
        f"FFN={args.ffn_dim} V={args.vocab} fp32, source {args.source_len} tokens, "
        f"{args.tokens} tokens generated, {torch.get_num_threads()} threads, "
        f"torch {torch.__version__}, median of {args.repeats}"
    )
    print("\n1. greedy decoding: KV cache ÷ recomputing the prefix (ms per sentence)")
    header = (
        f"{'batch':>5} {'cached ms':>13} {'recompute ms':>15} {'cached/recompute':>17} "
        f"{'speed-up':>10}  notes"
    )
    print(header)
    print("-" * len(header))
    for batch in args.batches:
        print(cache_row(model, args, batch), flush=True)
    print(f"\n2. decoding speed (KV cache; NAT: one pass), {args.tokens} tokens per sentence")
    header = f"{'batch':>5} {'method':<8} {'sentences/s':>13} {'÷ greedy':>12} {'mean len':>11}"
    print(header)
    print("-" * len(header))
    for batch in args.batches:
        for row in speed_rows(model, args, batch):
            print(row, flush=True)


if __name__ == "__main__":
    main()
