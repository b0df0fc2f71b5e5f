"""The fused output layer + cross-entropy (``train.fused_cross_entropy``): peak memory and
time of a seq2seq training step, fused ÷ plain, at large vocabularies.

The model is a Transformer encoder–decoder (:class:`selfattn.models.seq2seq.Seq2SeqTransformer`,
E=256, H=4, FFN=1024, 2 + 2 layers, dropout 0.1) with its vocabulary projection tied to
the target embedding, trained by :class:`selfattn.tasks.seq2seq.objective.Seq2SeqObjective`
(label smoothing 0.1) and AdamW on a fixed batch of B sources of 32 tokens and targets of
random lengths up to T (a quarter of the target rows are padding, as in bucketed batches).
For each vocabulary size it prints, for ``train.fused_cross_entropy`` off (plain: the
decoder's ``(B, T, V)`` log-probabilities) and on (fused):

* peak: the highest memory allocated during one whole step (forward, backward, AdamW)
  above the level before it (weights and AdamW's state; the previous step's gradients
  already released), counted by PyTorch's CPU allocator under ``torch.profiler`` with
  ``profile_memory=True`` (:func:`selfattn.bench.memory.measure_memory`): every tensor's
  bytes as allocated and freed, not the process's RSS (which freed memory the allocator
  keeps would blur);
* step time: median seconds of a step, the two settings interleaved step by step in this
  one process so machine noise hits both;
* the first step's losses of the two settings (the same weights), which must agree.

Usage::

    python benchmarks/fused_cross_entropy.py                       # vocab 8000 and 32000
    python benchmarks/fused_cross_entropy.py --vocab 32000 --steps 3
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Sequence

import torch

from selfattn.bench.memory import measure_memory
from selfattn.data.batching.seq2seq_collate import Seq2SeqBatch
from selfattn.models.config import StackConfig
from selfattn.models.seq2seq import Seq2SeqTransformer, decoder_like
from selfattn.models.seq2seq_options import Seq2SeqConfig
from selfattn.specials import BOS_ID, EOS_ID, IGNORE_INDEX, NUM_SPECIALS
from selfattn.tasks.seq2seq.objective import Seq2SeqObjective

EMBED, HEADS, FFN, LAYERS, SOURCE_LEN = 256, 4, 1024, 2, 32
SETTINGS = ("off", "on")


def make_batch(vocab: int, batch: int, target_len: int, seed: int = 0) -> Seq2SeqBatch:
    """Random sources of :data:`SOURCE_LEN` ids; targets of 3T/4 … T ids then EOS."""
    generator = torch.Generator().manual_seed(seed)
    source = torch.randint(NUM_SPECIALS, vocab, (batch, SOURCE_LEN), generator=generator)
    lengths = torch.randint(target_len * 3 // 4, target_len + 1, (batch,), generator=generator)
    words = torch.randint(NUM_SPECIALS, vocab, (batch, target_len + 1), generator=generator)
    positions = torch.arange(target_len + 1)[None, :]
    words = torch.where(positions == lengths[:, None], EOS_ID, words)
    padding = positions > lengths[:, None]  # (B, T + 1): after EOS
    target_in = torch.cat([torch.full((batch, 1), BOS_ID), words[:, :-1]], dim=1)
    target_out = words.masked_fill(padding, IGNORE_INDEX)
    return Seq2SeqBatch(
        source,
        torch.zeros(batch, SOURCE_LEN, dtype=torch.bool),
        target_in.masked_fill(padding, 0),
        target_out,
        padding,
    )


def measure(vocab: int, batch: int, target_len: int, steps: int) -> dict[str, dict[str, float]]:
    """Peak bytes, median step seconds and first loss of each setting at ``vocab``."""
    torch.manual_seed(0)
    stack = StackConfig(EMBED, HEADS, FFN, num_layers=LAYERS, dropout=0.1, max_len=64)
    model = Seq2SeqTransformer(
        stack, decoder_like(stack), source_vocab_size=vocab, target_vocab_size=vocab
    ).train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    data = make_batch(vocab, batch, target_len)
    objectives = {
        s: Seq2SeqObjective(Seq2SeqConfig(), 0.1, fused_cross_entropy=s) for s in SETTINGS
    }
    results: dict[str, dict[str, float]] = {s: {} for s in SETTINGS}
    for setting in SETTINGS:  # the same weights and dropout masks: the same loss
        torch.manual_seed(1)
        results[setting]["loss"] = float(objectives[setting].loss(model, data, 0).detach())

    def step(setting: str) -> None:
        objectives[setting].loss(model, data, 0).backward()
        optimizer.step()

    for setting in SETTINGS:
        optimizer.zero_grad(set_to_none=True)
        step(setting)  # warm-up; AdamW's state exists from here on, in both settings
    for setting in SETTINGS:
        optimizer.zero_grad(set_to_none=True)  # outside: the peak counts the new gradients
        results[setting]["peak"] = measure_memory(lambda s=setting: step(s)).peak
    times: dict[str, list[float]] = {s: [] for s in SETTINGS}
    for _ in range(steps):
        for setting in SETTINGS:
            optimizer.zero_grad(set_to_none=True)
            started = time.perf_counter()
            step(setting)
            times[setting].append(time.perf_counter() - started)
    for setting in SETTINGS:
        results[setting]["seconds"] = statistics.median(times[setting])
    return results


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--vocab", type=int, nargs="+", default=[8000, 32000])
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--target-len", type=int, default=48, help="T, the longest target")
    parser.add_argument("--steps", type=int, default=5, help="timed steps per setting")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    mib = 2**20
    rows = int((make_batch(args.vocab[0], args.batch, args.target_len).target_out >= 0).sum())
    print(
        f"seq2seq transformer E={EMBED}, {LAYERS}+{LAYERS} layers, tied output, "
        f"B={args.batch}, T≤{args.target_len} ({rows} scored target tokens), "
        f"{torch.get_num_threads()} thread"
    )
    header = ("vocab", "peak off MiB", "peak on MiB", "peak ÷", "step off s", "step on s")
    print("".join(f"{h:>13}" for h in header) + f"{'time ÷':>9}{'|Δ loss|':>11}")
    values: dict[str, float] = {"target_tokens": rows}
    for vocab in args.vocab:
        r = measure(vocab, args.batch, args.target_len, args.steps)
        off, on = r["off"], r["on"]
        values |= {
            f"peak-off-{vocab}": round(off["peak"] / mib, 1),
            f"peak-on-{vocab}": round(on["peak"] / mib, 1),
            f"peak-{vocab}": round(on["peak"] / off["peak"], 3),
            f"step-off-{vocab}": round(off["seconds"], 3),
            f"step-on-{vocab}": round(on["seconds"], 3),
            f"time-{vocab}": round(on["seconds"] / off["seconds"], 3),
        }
        print(
            f"{vocab:>13}{off['peak'] / mib:13.1f}{on['peak'] / mib:13.1f}"
            f"{on['peak'] / off['peak']:13.3f}{off['seconds']:13.3f}{on['seconds']:13.3f}"
            f"{on['seconds'] / off['seconds']:9.3f}{abs(on['loss'] - off['loss']):11.2e}"
        )
    print(json.dumps(values))  # the numbers, for tests/docs/records.py record


if __name__ == "__main__":
    main()
