"""Tiny text runs for the tests: a file of made-up reviews and the config of a small model
trained on it (one CPU thread, no dropout), written into a test's folder."""

from __future__ import annotations

import random
from pathlib import Path

import torch

from selfattn.cli.main import main

from .helpers_cli import set_flags

GOOD, BAD = ["warm", "funny", "best", "great"], ["dull", "long", "mess", "worst"]


def write_reviews(path: Path, count: int = 30) -> Path:
    """``label,text`` rows "a … film" of 1 to 5 words, odd rows pos, even rows neg."""
    rng = random.Random(0)
    rows = []
    for i in range(count):
        words = [rng.choice(GOOD if i % 2 else BAD) for _ in range(rng.randint(1, 5))]
        rows.append(f"{('neg', 'pos')[i % 2]},a {' '.join(words)} film")
    path.write_text("label,text\n" + "\n".join(rows) + "\n", encoding="utf-8")
    return path


def write_tiny_config(
    folder: Path,
    dataset: Path,
    *,
    epochs: int = 1,
    batch_size: int = 16,
    num_layers: int = 1,
    architecture: str = "transformer",
    **train: int,
) -> Path:
    """``folder/config.toml``: an E=16 model on ``dataset`` with run_dir ``folder/run``;
    ``train`` adds fields to the ``[train]`` section (``keep_epochs=2``)."""
    heads = "num_heads = 2\n" if architecture == "transformer" else ""
    extra = "".join(f"{name} = {value}\n" for name, value in train.items())
    config = folder / "config.toml"
    config.write_text(
        f"""run_dir = "{folder / "run"}"

[data]
dataset = "{dataset}"
batch_size = {batch_size}
max_len = 48

[model]
architecture = "{architecture}"
embed_dim = 16
{heads}num_layers = {num_layers}
ffn_dim = 16
dropout = 0.0

[train]
epochs = {epochs}
{extra}warmup_steps = 1
device = "cpu"
threads = 1
""",
        encoding="utf-8",
    )
    return config


def train_config(config: Path, run_dir: Path, *settings: str, resume: bool = False) -> int:
    """``selfattn train config`` into ``run_dir`` on one thread, no progress bar; each
    of ``settings`` is one ``--set`` (``"train.epochs=2"``); ``resume`` continues the
    run instead of starting it afresh. Returns the exit status (PyTorch's thread count is
    put back after)."""
    threads = torch.get_num_threads()
    overrides = [f"run_dir={run_dir}", "train.threads=1", *settings]
    try:
        return main(
            [
                "train",
                str(config),
                "--no-progress",
                "--resume" if resume else "--overwrite",
                *set_flags(*overrides),
            ]
        )
    finally:
        torch.set_num_threads(threads)
