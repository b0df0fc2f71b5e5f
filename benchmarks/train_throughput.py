"""Training throughput of selfattn's ``Encoder`` against ``torch.nn.TransformerEncoder``.

Both stacks have the same size (E, H, layers, FFN width), dropout 0, post-LN blocks, batch
first, and start from the same weights (ours is built with ``EncoderBlock.from_torch``, and
the forward outputs are checked to agree). Each step is what training does: forward on a
right-padded batch with its key padding mask, a loss over the real positions, backward,
and an AdamW step. Ours and the reference run interleaved (alternating order) in one
process on the same batches, so machine noise hits both; the table gives the median
tokens/s (real, non-padding tokens) of each and the ratio ours ÷ reference (> 1: ours is
faster). Rows timed while other processes used the CPU are marked ``noisy``.

Usage::

    python benchmarks/train_throughput.py                 # B×L = 32×64 and 16×256, ~1 min
    python benchmarks/train_throughput.py --shapes 8x512 --steps 10
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable

import torch
from torch import Tensor, nn

from selfattn.blocks import EncoderBlock
from selfattn.models import Encoder, StackConfig
from selfattn.runtime import machine_busy_seconds

FOREIGN_LOAD_NOTE = 0.3  # cores used by other processes above which a row is marked noisy


def make_pair(
    embed_dim: int, num_heads: int, num_layers: int, ffn_dim: int
) -> tuple[nn.Module, nn.Module]:
    """``(ours, reference)`` with identical weights."""
    layer = nn.TransformerEncoderLayer(
        embed_dim, num_heads, ffn_dim, dropout=0.0, batch_first=True, norm_first=False
    )
    reference = nn.TransformerEncoder(layer, num_layers, enable_nested_tensor=False)
    ours = Encoder(StackConfig(embed_dim, num_heads, ffn_dim, num_layers=num_layers))
    ours.layers = nn.ModuleList(EncoderBlock.from_torch(block) for block in reference.layers)
    return ours, reference


def make_batches(
    count: int, batch: int, length: int, embed_dim: int, generator: torch.Generator
) -> list[tuple[Tensor, Tensor]]:
    """Random ``(x (B, L, E), key_padding_mask (B, L))`` with lengths in [L/2, L]."""
    out = []
    for _ in range(count):
        x = torch.randn(batch, length, embed_dim, generator=generator)
        lengths = torch.randint(length // 2, length + 1, (batch,), generator=generator)
        lengths[0] = length  # the longest sequence sets L, as a collator would
        out.append((x, torch.arange(length)[None, :] >= lengths[:, None]))
    return out


def train_step(
    run: Callable[[Tensor, Tensor], Tensor], optimizer: torch.optim.Optimizer
) -> Callable[[Tensor, Tensor], None]:
    """One forward + backward + AdamW step on a batch."""

    def step(x: Tensor, mask: Tensor) -> None:
        out = run(x, mask)
        loss = out.masked_fill(mask[..., None], 0.0).pow(2).mean()
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()

    return step


def check_agreement(ours: nn.Module, reference: nn.Module, x: Tensor, mask: Tensor) -> float:
    """Largest difference of the two stacks' outputs at real positions."""
    with torch.no_grad():
        a = ours(x, key_padding_mask=mask).last_hidden_state
        b = reference(x, src_key_padding_mask=mask)
    real = ~mask
    return float((a[real] - b[real]).abs().max())


def measure(args: argparse.Namespace, batch: int, length: int) -> dict[str, object]:
    torch.manual_seed(0)
    ours, reference = make_pair(args.embed_dim, args.num_heads, args.num_layers, args.ffn_dim)
    difference = check_agreement(
        ours, reference, *make_batches(1, batch, length, args.embed_dim, torch.Generator())[0]
    )
    steps = {
        "ours": train_step(
            lambda x, m: ours(x, key_padding_mask=m).last_hidden_state,
            torch.optim.AdamW(ours.parameters(), lr=1e-4),
        ),
        "ref": train_step(
            lambda x, m: reference(x, src_key_padding_mask=m),
            torch.optim.AdamW(reference.parameters(), lr=1e-4),
        ),
    }
    ours.train()
    reference.train()
    batches = make_batches(
        args.steps, batch, length, args.embed_dim, torch.Generator().manual_seed(1)
    )
    tokens = [int((~mask).sum()) for _, mask in batches]
    for role in steps:  # warm-up: allocator, kernels, AdamW state
        for x, mask in batches[: args.warmup]:
            steps[role](x, mask)
    rates: dict[str, list[float]] = {role: [] for role in steps}
    busy_before, cpu_before, wall_before = machine_busy_seconds(), _own_cpu(), time.time()
    for i, ((x, mask), n) in enumerate(zip(batches, tokens, strict=True)):
        for role in ("ours", "ref") if i % 2 else ("ref", "ours"):
            start = time.perf_counter()
            steps[role](x, mask)
            rates[role].append(n / (time.perf_counter() - start))
    wall = time.time() - wall_before
    foreign = (machine_busy_seconds() - busy_before - (_own_cpu() - cpu_before)) / max(wall, 1e-9)
    return {
        "ours": statistics.median(rates["ours"]),
        "ref": statistics.median(rates["ref"]),
        "difference": difference,
        "foreign": foreign,
    }


def _own_cpu() -> float:
    t = os.times()
    return t.user + t.system


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--shapes", default="32x64,16x256", help="comma-separated BxL (default: %(default)s)"
    )
    parser.add_argument("--embed-dim", type=int, default=128)
    parser.add_argument("--num-heads", type=int, default=4)
    parser.add_argument("--num-layers", type=int, default=2)
    parser.add_argument("--ffn-dim", type=int, default=512)
    parser.add_argument("--steps", type=int, default=30, help="timed steps per stack")
    parser.add_argument("--warmup", type=int, default=3, help="untimed steps per stack")
    parser.add_argument("--threads", type=int, default=None, help="torch intra-op threads")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    print(
        f"E={args.embed_dim} H={args.num_heads} layers={args.num_layers} "
        f"FFN={args.ffn_dim} post-LN dropout=0 fp32, forward+backward+AdamW, "
        f"{torch.get_num_threads()} threads, torch {torch.__version__}"
    )
    header = f"{'B x L':>9} {'ours tok/s':>11} {'torch tok/s':>12} {'ours/torch':>11}  notes"
    print(header)
    print("-" * len(header))
    for shape in args.shapes.split(","):
        batch, length = (int(v) for v in shape.lower().split("x"))
        row = measure(args, batch, length)
        notes = [f"max |ours - torch| = {row['difference']:.1e}"]
        if isinstance(row["foreign"], float) and row["foreign"] > FOREIGN_LOAD_NOTE:
            notes.append(f"noisy: other processes used {row['foreign']:.1f} cores")
        ours, ref = float(row["ours"]), float(row["ref"])  # type: ignore[arg-type]
        print(
            f"{batch:>4} x {length:<4} {ours:>11.0f} {ref:>12.0f} {ours / ref:>11.2f}  "
            + "; ".join(notes),
            flush=True,
        )


if __name__ == "__main__":
    main()
