"""Per-block activation checkpointing (``train.checkpoint_activations``): memory kept for
the backward pass and step time, with ÷ without, on a token transformer.

The model is a token tagger: embeddings of a vocabulary of 8192 words, sinusoidal
positions, our ``Encoder`` (E=256, H=4, FFN=1024, 4 post-LN layers, dropout 0.1) and a
linear head over 48 tags; batches of 32 × 128 tokens, cross-entropy over every position,
AdamW; one thread. Printed, for the same model without and with checkpointing:

* saved bytes: what one forward keeps for the backward pass (every tensor autograd
  saves, plus the inputs a checkpointed block keeps to recompute from;
  :func:`selfattn.models.checkpointing.saved_bytes`);
* peak: the highest memory allocated during one whole step above the level before it
  (``torch.profiler``, :func:`selfattn.bench.memory.measure_memory`);
* step time: median seconds of a forward + backward + AdamW step, the two settings
  interleaved step by step so machine noise hits both.

The last line is the numbers once more as one JSON object (``saved-off``, ``saved-on``,
``saved-ratio`` and so on, and the 1-minute load average), which
``tests/docs/records.py record`` reads.

Usage::

    python benchmarks/activation_memory.py              # ~1 min on one thread
    python benchmarks/activation_memory.py --steps 3
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from selfattn.bench.memory import measure_memory
from selfattn.models import Encoder, StackConfig
from selfattn.models.checkpointing import enable_activation_checkpointing, saved_bytes

VOCAB, TAGS, EMBED, HEADS, FFN, LAYERS = 8192, 48, 256, 4, 1024, 4


class Tagger(nn.Module):
    """Embeddings → Encoder → a linear head: ``(B, L)`` ids → ``(B, L, TAGS)`` logits."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCAB, EMBED)
        config = StackConfig(
            EMBED, HEADS, FFN, num_layers=LAYERS, dropout=0.1, positional="sinusoidal"
        )
        self.encoder = Encoder(config)
        self.head = nn.Linear(EMBED, TAGS)

    def forward(self, ids: Tensor) -> Tensor:
        return self.head(self.encoder(self.embed(ids)).last_hidden_state)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=5, help="timed steps per setting")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--length", type=int, default=128)
    args = parser.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = Tagger().train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    ids = torch.randint(0, VOCAB, (args.batch, args.length))
    tags = torch.randint(0, TAGS, (args.batch, args.length))

    def loss() -> Tensor:
        return F.cross_entropy(model(ids).flatten(0, 1), tags.flatten())

    def step() -> None:
        optimizer.zero_grad(set_to_none=True)
        loss().backward()
        optimizer.step()

    settings = (False, True)
    saved, peaks, times = {}, {}, {on: [] for on in settings}
    for on in settings:
        enable_activation_checkpointing(model, on)
        step()  # warm-up; AdamW's state exists from here on, in both settings
        saved[on] = saved_bytes(model, loss)
        peaks[on] = measure_memory(step).peak
    for _ in range(args.steps):
        for on in settings:
            enable_activation_checkpointing(model, on)
            started = time.perf_counter()
            step()
            times[on].append(time.perf_counter() - started)
    seconds = {on: statistics.median(times[on]) for on in settings}

    mib = 2**20
    print(
        f"token transformer: vocab {VOCAB}, E={EMBED}, {LAYERS} layers, "
        f"B×L = {args.batch}×{args.length}, {torch.get_num_threads()} thread"
    )
    print(f"{'':24}{'without':>12}{'with':>12}{'with ÷ without':>16}")
    rows = (
        ("saved for backward MiB", saved[False] / mib, saved[True] / mib),
        ("peak of a step MiB", peaks[False] / mib, peaks[True] / mib),
        ("step time s (median)", seconds[False], seconds[True]),
    )
    values: dict[str, float] = {}
    for (name, without, with_), key in zip(rows, ("saved", "peak", "step"), strict=True):
        print(f"{name:24}{without:12.2f}{with_:12.2f}{with_ / without:16.3f}")
        values |= {f"{key}-off": without, f"{key}-on": with_, f"{key}-ratio": with_ / without}
    values["load"] = os.getloadavg()[0]  # the times are absolute: how busy the machine was
    print(json.dumps(values))  # the numbers, for tests/docs/records.py record


if __name__ == "__main__":
    main()
