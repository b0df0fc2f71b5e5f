"""Training throughput of selfattn's token model against ``torch.nn.TransformerEncoder``
and Hugging Face's ``BertForMaskedLM``, as whole models: token ids in, vocabulary logits out.

The three sides (same E, H, layers, FFN width, vocabulary V, post-LN, relu, dropout,
learned absolute positions, fp32 on the CPU):

* **ours**: the token-task model selfattn builds, ``selfattn.models.build_model`` with a
  ``token`` task and ``num_labels = V``: a word embedding (V × E), a learned position
  table, our ``Encoder`` (post-LN blocks, fused attention) and ``TokenClassifier`` (dropout
  and an untied E → V linear).
* **torch**: the same model with the encoder swapped for ``torch.nn.TransformerEncoder``
  (``enable_nested_tensor=False``, batch first): ours' embedding, positions and head are
  copied and ours' block weights loaded into torch's layers, so in eval mode the two give
  the same logits (the difference is printed).
* **HF**: ``transformers.BertForMaskedLM`` from a ``BertConfig`` (random weights, no hub
  name), ``attn_implementation="sdpa"``, ``hidden_act="relu"``, the same dropout on
  hidden states and attention weights, ``max_position_embeddings`` = ours' position table.
  BERT is post-LN by design. It does a little more than ours: a token-type embedding
  added to every position, a LayerNorm on the embeddings, and its MLM head's transform
  (an E × E dense layer, relu, LayerNorm) before the vocabulary projection; and a little
  less: that projection is tied to the word embedding (V × E fewer parameters for AdamW
  to update; the same matrix products). Both parameter counts are printed. BERT has no
  dropout before its head, ours does. The extra E × E layer costs ~1/(8·layers) of one
  encoder's matrix work, well under the noise at these sizes.

The last line is every row and parameter count once more as one JSON object
(``d256.default.t1.32x128.ours_over_hf``, ``d256.ours_params``, …), which
``tests/docs/records.py record`` reads.

Each step is what training does: forward on a right-padded batch (lengths in [L/2, L]) with
its padding mask, cross-entropy of the logits at the real positions against random
targets (computed the same way outside each model; BERT gets no ``labels``), backward, and
an AdamW step. The sides take turns on the same batches in one process (the order rotates
every step, so machine noise hits all), and the table gives the median tokens/s (real,
non-padding tokens) of each and the ratios ours ÷ torch and ours ÷ HF (> 1: ours is
faster). Rows timed while other processes used the CPU are marked ``noisy``.

Dropout placement and the like (``--placements``): ``everywhere`` is the defaults before
2026-11-26, dropout 0.1 on the embeddings, the attention weights, each sub-layer's output,
the feed-forward hidden layer and before the head (18 masks per step at 4 layers), with
PyTorch's masks and ``F.linear``; ``bert`` is BERT's placement, ``model.ffn_dropout = 0``
and ``model.head_dropout = 0`` (13 masks, as BertForMaskedLM draws); ``bert-uniform`` adds
``model.dropout_masks = "uniform"`` (masks thresholded from ``torch.rand`` noise,
:mod:`selfattn.attention.dropout`); ``default`` is the [model] defaults: that (their
``"auto"`` masks are uniform on the CPU) and ``model.linear_layers = "auto"`` (the linear
layers' forward and input gradient by oneDNN's linear on the CPU,
:class:`selfattn.attention.packed_linear.OneDNNLinear`).
torch's layers follow ours' placement (its ``dropout`` module is the feed-forward hidden
one; the head is ours) with PyTorch's masks; HF is the same model in every row.
``--clock cpu`` times each step by this process's CPU time: at 1 thread on a busy machine
the other processes barely count.

Usage::

    python benchmarks/train_throughput.py          # d256 + d512, 32×128, 1 and 2 threads: ~15 min
    python benchmarks/train_throughput.py --quick  # d256, 8×64, 3 steps, 1 thread: ~10 s
    python benchmarks/train_throughput.py --sizes d256 --threads 1 --steps 10
    python benchmarks/train_throughput.py --sizes d256 d512 --threads 1 --clock cpu
    python benchmarks/train_throughput.py --device cuda --dtype bfloat16 --steps 30 --warmup 3

On CUDA (``--device cuda``) every side keeps float32 weights and AdamW state and runs its
forward and loss under ``torch.autocast`` in ``--dtype`` (bf16 mixed precision, what
``train.amp`` does), each step is bracketed by ``torch.cuda.synchronize()``, and the
thread count and the CPU-load note do not apply.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from selfattn.datatypes import Batch
from selfattn.models.composed import TaskModel
from selfattn.models.linear_layers import use_linear_layers
from selfattn.models.registry import model_options
from selfattn.models.task_model import build_model
from selfattn.runtime import machine_busy_seconds

FOREIGN_LOAD_NOTE = 0.3  # cores used by other processes above which a row is marked noisy
SIDES = ("ours", "torch", "hf")
#: Dropout placements of ours, as [model] fields.
PLACEMENTS: dict[str, dict[str, Any]] = {
    "everywhere": {
        "ffn_dropout": None,
        "head_dropout": None,
        "dropout_masks": "bernoulli",
        "linear_layers": "torch",
    },
    "bert": {"dropout_masks": "bernoulli", "linear_layers": "torch"},
    "bert-uniform": {"dropout_masks": "uniform", "linear_layers": "torch"},
    "default": {},
}


@dataclass(frozen=True)
class Size:
    """A model size: E, H, layers, FFN width."""

    embed_dim: int
    num_heads: int
    num_layers: int
    ffn_dim: int

    def __str__(self) -> str:
        return f"E={self.embed_dim} H={self.num_heads} layers={self.num_layers} FFN={self.ffn_dim}"


SIZES = {
    "tiny": Size(64, 2, 2, 128),  # the smoke test's
    "d256": Size(256, 4, 4, 1024),
    "d512": Size(512, 8, 8, 2048),
}


def build_ours(
    size: Size, vocab: int, max_len: int, dropout: float, placement: str = "default"
) -> TaskModel:
    """selfattn's token model: embedding → learned positions → post-LN Encoder → E → V,
    with the dropout ``placement`` (a key of :data:`PLACEMENTS`)."""
    config = model_options(
        embed_dim=size.embed_dim,
        num_heads=size.num_heads,
        num_layers=size.num_layers,
        ffn_dim=size.ffn_dim,
        dropout=dropout,
        positional="learned",
        norm_first=False,
        **PLACEMENTS[placement],
    )
    model = build_model(
        config,
        task="token",
        vocab_size=vocab,
        char_vocab_size=None,
        feature_dim=None,
        num_labels=vocab,
        max_len=max_len,
    )
    assert isinstance(model, TaskModel)
    return model


class TorchTokenModel(nn.Module):
    """Ours with its encoder swapped for ``torch.nn.TransformerEncoder`` (same weights)."""

    def __init__(self, ours: TaskModel, size: Size, dropout: float) -> None:
        super().__init__()
        encoder = ours.encoder.encoder  # type: ignore[union-attr]
        self.embedding = copy.deepcopy(ours.embedding)
        self.positional = copy.deepcopy(encoder.absolute)
        self.embed_dropout = nn.Dropout(dropout)
        layer = nn.TransformerEncoderLayer(
            size.embed_dim,
            size.num_heads,
            size.ffn_dim,
            dropout=dropout,
            batch_first=True,
            norm_first=False,
        )
        self.encoder = nn.TransformerEncoder(layer, size.num_layers, enable_nested_tensor=False)
        for theirs, block in zip(self.encoder.layers, encoder.layers, strict=True):
            load_block(theirs, block)
            theirs.dropout.p = block.feedforward.dropout.p  # ours' placement
        self.head = copy.deepcopy(ours.head)
        self.head.dropout = nn.Dropout(ours.head.dropout.p)  # torch's masks on this side
        use_linear_layers(self, "torch")  # and torch's linear layers

    def forward(self, batch: Batch) -> Tensor:
        mask = batch.key_padding_mask
        x = self.embed_dropout(self.positional(self.embedding(batch)))
        return self.head(self.encoder(x, src_key_padding_mask=mask), mask)


@torch.no_grad()
def load_block(theirs: nn.TransformerEncoderLayer, ours: nn.Module) -> None:
    """Copy one of our post-LN ``EncoderBlock``s into a torch encoder layer."""
    attn, ff = ours.self_attn, ours.feedforward
    projections = (attn.q_proj, attn.k_proj, attn.v_proj)
    theirs.self_attn.in_proj_weight.copy_(torch.cat([p.weight for p in projections]))
    theirs.self_attn.in_proj_bias.copy_(torch.cat([p.bias for p in projections]))
    pairs = [
        (theirs.self_attn.out_proj, attn.out_proj),
        (theirs.linear1, ff.in_proj),
        (theirs.linear2, ff.out_proj),
        (theirs.norm1, ours.norm1),
        (theirs.norm2, ours.norm2),
    ]
    for target, source in pairs:
        target.load_state_dict(source.state_dict())


def build_hf(size: Size, vocab: int, max_len: int, dropout: float) -> nn.Module:
    """``BertForMaskedLM`` of the same size, random weights, SDPA attention."""
    from transformers import BertConfig, BertForMaskedLM

    config = BertConfig(
        vocab_size=vocab,
        hidden_size=size.embed_dim,
        num_hidden_layers=size.num_layers,
        num_attention_heads=size.num_heads,
        intermediate_size=size.ffn_dim,
        hidden_act="relu",
        hidden_dropout_prob=dropout,
        attention_probs_dropout_prob=dropout,
        max_position_embeddings=max_len,
        attn_implementation="sdpa",
    )
    return BertForMaskedLM(config)


def hf_logits(model: nn.Module) -> Callable[[Batch], Tensor]:
    def run(batch: Batch) -> Tensor:
        assert batch.token_ids is not None
        attention_mask = (~batch.key_padding_mask).long()
        return model(input_ids=batch.token_ids, attention_mask=attention_mask).logits

    return run


def make_batches(
    count: int, batch: int, length: int, vocab: int, generator: torch.Generator
) -> list[Batch]:
    """Random token batches with lengths in [L/2, L], padding id 0 and targets at every
    real position (-100 at padding)."""
    out = []
    for _ in range(count):
        lengths = torch.randint(length // 2, length + 1, (batch,), generator=generator)
        lengths[0] = length  # the longest sequence sets L, as a collator would
        mask = torch.arange(length)[None, :] >= lengths[:, None]
        ids = torch.randint(1, vocab, (batch, length), generator=generator).masked_fill(mask, 0)
        labels = torch.randint(0, vocab, (batch, length), generator=generator).masked_fill(
            mask, -100
        )
        out.append(Batch(ids, None, None, mask, labels))
    return out


def train_step(
    run: Callable[[Batch], Tensor],
    optimizer: torch.optim.Optimizer,
    device: str = "cpu",
    dtype: torch.dtype = torch.float32,
) -> Callable[[Batch], None]:
    """One forward + cross-entropy + backward + AdamW step on a batch (forward and loss
    under autocast in ``dtype`` when it is not float32)."""
    autocast = dtype != torch.float32

    def step(batch: Batch) -> None:
        with torch.autocast(device, dtype=dtype, enabled=autocast):
            logits = run(batch)
            loss = F.cross_entropy(
                logits.flatten(0, 1).float(), batch.labels.flatten(), ignore_index=-100
            )
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()

    return step


def synchronize(device: str) -> None:
    """Wait for the GPU's queued work, so wall-clock time covers it (no-op on the CPU)."""
    if device == "cuda":
        torch.cuda.synchronize()


def parameter_count(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())  # tied weights are listed once


def measure(
    args: argparse.Namespace, size: Size, batch: int, length: int, placement: str = "default"
) -> dict[str, float | int]:
    """Median tokens/s of each side at one size, shape and dropout placement, in the
    current thread count."""
    torch.manual_seed(0)
    ours = build_ours(size, args.vocab, length, args.dropout, placement)
    reference = TorchTokenModel(ours, size, args.dropout)
    hf = build_hf(size, args.vocab, length, args.dropout)
    runs: dict[str, Callable[[Batch], Tensor]] = {
        "ours": ours,
        "torch": reference,
        "hf": hf_logits(hf),
    }
    models: dict[str, nn.Module] = {"ours": ours, "torch": reference, "hf": hf}
    for model in models.values():
        model.to(args.device)
    probe = make_batches(1, batch, length, args.vocab, torch.Generator())[0].to(args.device)
    for model in models.values():
        model.eval()
    with torch.no_grad():
        real = ~probe.key_padding_mask
        difference = float((ours(probe)[real] - reference(probe)[real]).abs().max())
    for model in models.values():
        model.train()
    dtype = getattr(torch, args.dtype)
    steps = {
        side: train_step(
            runs[side],
            torch.optim.AdamW(models[side].parameters(), lr=1e-4),
            args.device,
            dtype,
        )
        for side in SIDES
    }
    batches = make_batches(args.steps, batch, length, args.vocab, torch.Generator().manual_seed(1))
    batches = [b.to(args.device) for b in batches]
    tokens = [int((~b.key_padding_mask).sum()) for b in batches]
    for side in SIDES:  # warm-up: allocator, kernels, AdamW state
        for b in batches[: args.warmup]:
            steps[side](b)
    rates: dict[str, list[float]] = {side: [] for side in SIDES}
    busy_before, cpu_before, wall_before = machine_busy_seconds(), _own_cpu(), time.time()
    clock = time.process_time if args.clock == "cpu" else time.perf_counter
    for i, (b, n) in enumerate(zip(batches, tokens, strict=True)):
        for side in SIDES[i % 3 :] + SIDES[: i % 3]:  # rotate who goes first
            synchronize(args.device)
            start = clock()
            steps[side](b)
            synchronize(args.device)
            rates[side].append(n / (clock() - start))
    wall = time.time() - wall_before
    foreign = (machine_busy_seconds() - busy_before - (_own_cpu() - cpu_before)) / max(wall, 1e-9)
    if args.device != "cpu":
        foreign = 0.0  # the host's other processes do not share the GPU
    return {
        **{side: statistics.median(rates[side]) for side in SIDES},
        "difference": difference,
        "foreign": foreign,
        "ours_params": parameter_count(ours),
        "torch_params": parameter_count(reference),
        "hf_params": parameter_count(hf),
    }


def _own_cpu() -> float:
    t = os.times()
    return t.user + t.system


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--sizes",
        nargs="+",
        choices=sorted(SIZES),
        default=["d256", "d512"],
        help="model sizes (d256: E=256 H=4 4 layers FFN 1024; d512: E=512 H=8 8 layers FFN 2048)",
    )
    parser.add_argument(
        "--shapes", default="32x128", help="comma-separated BxL (default: %(default)s)"
    )
    parser.add_argument("--vocab", type=int, default=8192)
    parser.add_argument("--dropout", type=float, default=0.1, help="the [model] default")
    parser.add_argument("--steps", type=int, default=7, help="timed steps per side")
    parser.add_argument("--warmup", type=int, default=1, help="untimed steps per side")
    parser.add_argument(
        "--threads", type=int, nargs="+", default=[1, 2], help="torch intra-op thread counts"
    )
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument(
        "--dtype",
        choices=["float32", "bfloat16", "float16"],
        default="float32",
        help="autocast dtype of forward and loss (CUDA only: the CPU here has no bf16 units)",
    )
    parser.add_argument(
        "--placements",
        nargs="+",
        choices=list(PLACEMENTS),
        default=list(PLACEMENTS),
        help="ours' dropout placement: everywhere (the defaults before 2026-11-26), bert "
        "(model.ffn_dropout = model.head_dropout = 0), bert-uniform (and "
        'model.dropout_masks = "uniform"), default (the [model] defaults: and '
        'model.linear_layers = "auto")',
    )
    parser.add_argument(
        "--clock",
        choices=("wall", "cpu"),
        default="wall",
        help="time a step by the wall clock, or by this process's CPU time (at 1 thread a "
        "busy machine's other processes then count far less; at N threads it is the work "
        "of all N, not the latency)",
    )
    parser.add_argument("--quick", action="store_true", help="d256, 8x64, 3 steps, 1 thread")
    args = parser.parse_args(argv)
    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: no CUDA device here")
    if args.clock == "cpu" and args.device != "cpu":
        parser.error("--clock cpu times CPU work: use it with --device cpu")
    if args.device == "cpu" and args.dtype != "float32":
        parser.error(f"--dtype {args.dtype} on the CPU: this benchmark runs float32 there")
    if args.quick:
        args.sizes, args.shapes, args.steps, args.threads = ["d256"], "8x64", 3, [1]
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    import transformers

    print(
        f"token models: V={args.vocab}, post-LN, relu, dropout {args.dropout}, "
        f"{args.dtype} on {args.device}, "
        f"forward+cross-entropy+backward+AdamW, median of {args.steps} steps after "
        f"{args.warmup} warm-up ({args.clock} clock); torch {torch.__version__}, transformers "
        f"{transformers.__version__}"
    )
    header = (
        f"{'size':>5} {'placement':>19} {'thr':>3} {'B x L':>9} {'ours tok/s':>11} "
        f"{'torch tok/s':>12} {'HF tok/s':>9} {'ours/torch':>11} {'ours/HF':>8}  notes"
    )
    print(header)
    print("-" * len(header))
    counts: dict[str, dict[str, float | int]] = {}
    values: dict[str, dict[str, float | int]] = {}
    for name in args.sizes:
        for threads in args.threads:
            torch.set_num_threads(threads)
            for shape in args.shapes.split(","):
                batch, length = (int(v) for v in shape.lower().split("x"))
                for placement in args.placements:
                    row = measure(args, SIZES[name], batch, length, placement)
                    counts[name] = row
                    print_row(name, placement, threads, batch, length, row)
                    values[f"{name}.{placement}.t{threads}.{batch}x{length}"] = {
                        "ours": row["ours"],
                        "torch": row["torch"],
                        "hf": row["hf"],
                        "ours_over_torch": row["ours"] / row["torch"],
                        "ours_over_hf": row["ours"] / row["hf"],
                    }
    print("\nparameters (tied weights counted once; the placement changes none)")
    for name, row in counts.items():
        print(
            f"{name:>5} {SIZES[name]}: ours {row['ours_params']:,}, torch "
            f"{row['torch_params']:,}, HF BertForMaskedLM {row['hf_params']:,}"
        )
        values[name] = {key: row[key] for key in ("ours_params", "torch_params", "hf_params")}
    print(json.dumps(values))  # the numbers, for tests/docs/records.py record


def print_row(
    name: str, placement: str, threads: int, batch: int, length: int, row: dict[str, float | int]
) -> None:
    """One line of the table."""
    notes = [f"max |ours - torch| logits = {row['difference']:.1e}"]
    if row["foreign"] > FOREIGN_LOAD_NOTE:
        notes.append(f"noisy: other processes used {row['foreign']:.1f} cores")
    ours, ref, hf = row["ours"], row["torch"], row["hf"]
    print(
        f"{name:>5} {placement:>19} {threads:>3} {batch:>4} x {length:<4}"
        f"{ours:>11.0f} {ref:>12.0f} {hf:>9.0f} {ours / ref:>11.2f} "
        f"{ours / hf:>8.2f}  " + "; ".join(notes),
        flush=True,
    )


if __name__ == "__main__":
    main()
