"""A seconds-long end-to-end example: why one label per vector needs the whole set.

Task (one label per vector, lecture 000 §"What is the output"): each input is a set of
random symbols; label every symbol 1 if it occurs more than once in *its* set, else 0.
A vector's label depends on the other vectors, so a fully connected layer applied to
each vector alone cannot beat guessing, while one layer of self-attention — each
position comparing its query with every key — solves it. No positional encoding is
needed: the answer does not depend on order.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass

import torch
from torch import Tensor, nn
from tqdm import tqdm

from selfattn.models import Encoder, StackConfig


@dataclass(frozen=True)
class ToyConfig:
    """Sizes of the toy run; the defaults train in a few seconds on 2 CPU cores."""

    vocab_size: int = 12
    length: int = 8
    embed_dim: int = 64
    num_heads: int = 4
    num_layers: int = 2
    steps: int = 400
    batch_size: int = 128
    lr: float = 3e-3
    seed: int = 0


def make_batch(
    config: ToyConfig, batch_size: int, generator: torch.Generator
) -> tuple[Tensor, Tensor]:
    """Symbols ``(B, L)`` and labels ``(B, L)``: 1 where the symbol repeats in its row."""
    symbols = torch.randint(config.vocab_size, (batch_size, config.length), generator=generator)
    same = symbols[:, :, None] == symbols[:, None, :]  # (B, L, L)
    labels = (same.sum(-1) > 1).long()
    return symbols, labels


class Tagger(nn.Module):
    """Embedding → (self-attention encoder | per-vector MLP) → a label per vector."""

    def __init__(self, config: ToyConfig, use_attention: bool) -> None:
        super().__init__()
        self.embed = nn.Embedding(config.vocab_size, config.embed_dim)
        self.encoder: nn.Module | None = None
        if use_attention:
            self.encoder = Encoder(
                StackConfig(
                    config.embed_dim,
                    config.num_heads,
                    4 * config.embed_dim,
                    num_layers=config.num_layers,
                    norm_first=True,
                )
            )
        self.body = nn.Sequential(nn.Linear(config.embed_dim, config.embed_dim), nn.ReLU())
        self.head = nn.Linear(config.embed_dim, 2)

    def forward(self, symbols: Tensor) -> Tensor:
        x = self.embed(symbols)
        if self.encoder is not None:
            x = self.encoder(x).last_hidden_state
        return self.head(self.body(x))  # (B, L, 2)


def train_and_evaluate(config: ToyConfig, use_attention: bool, progress: bool = True) -> float:
    """Train a :class:`Tagger` and return its per-vector accuracy on fresh sets."""
    torch.manual_seed(config.seed)
    generator = torch.Generator().manual_seed(config.seed)
    model = Tagger(config, use_attention)
    optimizer = torch.optim.AdamW(model.parameters(), lr=config.lr)
    name = "self-attention" if use_attention else "FC per vector"
    # disable=None: no bar when stderr is not a terminal (a log file gets no redraws).
    bar = tqdm(range(config.steps), desc=f"{name:>14}", disable=None if progress else True)
    for _ in bar:
        symbols, labels = make_batch(config, config.batch_size, generator)
        loss = nn.functional.cross_entropy(model(symbols).flatten(0, 1), labels.flatten())
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        bar.set_postfix(loss=f"{loss.item():.3f}")
    model.eval()
    with torch.no_grad():
        symbols, labels = make_batch(config, 4096, generator)
        return (model(symbols).argmax(-1) == labels).float().mean().item()


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``selfattn toy`` options."""
    parser.add_argument("--steps", type=int, default=ToyConfig.steps, help="training steps")
    parser.add_argument("--seed", type=int, default=ToyConfig.seed)
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bars")


def run(args: argparse.Namespace) -> int:
    """Train both models and print their accuracies side by side."""
    if args.steps < 1:
        raise ValueError(f"--steps must be >= 1, got {args.steps}")
    config = ToyConfig(steps=args.steps, seed=args.seed)
    print(
        f"Task: label each of {config.length} symbols (vocabulary {config.vocab_size}) "
        "1 if it repeats in its set, else 0."
    )
    start = time.perf_counter()
    results = {
        "FC per vector": train_and_evaluate(config, False, not args.no_progress),
        "self-attention": train_and_evaluate(config, True, not args.no_progress),
    }
    _, majority = make_batch(config, 4096, torch.Generator().manual_seed(1))
    results["majority label"] = max(
        majority.float().mean().item(), 1 - majority.float().mean().item()
    )
    print(f"\n{'model':<16} accuracy   (fresh sets, {time.perf_counter() - start:.1f} s in all)")
    for name, accuracy in sorted(results.items(), key=lambda item: item[1]):
        print(f"{name:<16} {accuracy:.3f}")
    return 0
