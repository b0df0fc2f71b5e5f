"""Training speed of one config under each float precision a GPU offers: float32, TF32
(``train.tf32``) and bf16 autocast (``train.amp``), with ratios against float32 measured in
the same process.

Every mode trains the config's model from the same seed through selfattn's own loop
(:class:`selfattn.train.loop.Trainer`) for ``--steps`` optimizer steps on the same batches
(the first of the training split's shuffled epoch 1), after one warm-up run in float32
(``--warmup`` steps), so that CUDA's start-up costs fall on no row. The modes take turns for
``--repeats`` rounds (the order rotates each round); a row gives the median tokens/s (real
source and target tokens, the loop's own count, the device synchronised at the end), its
ratio to float32's and the training loss over the steps. The last line names the fastest
mode (``fastest: NAME``), for scripts that choose one.

The data are prepared once; the dev set is cut to ``--dev`` examples, since each run ends
with an evaluation that is not timed.

On the CPU only float32 exists (TF32 and autocast are CUDA's, and ``train.tf32`` /
``train.amp`` are ignored there): other modes are refused in one line.

Usage::

    python benchmarks/train_precision.py --config configs/translate_bible_en_es.toml \\
        --device cuda --steps 40
    python benchmarks/train_precision.py --config configs/translate_de_en.toml --steps 3
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import warnings
from pathlib import Path
from typing import Any

import torch

from selfattn.config import load_config
from selfattn.tasks import prepare
from selfattn.tasks.run import epoch_batches
from selfattn.train.loop import train

#: Each mode's ``--set`` overrides.
MODES: dict[str, tuple[str, ...]] = {
    "float32": (),
    "tf32": ("train.tf32=true",),
    "bf16": ("train.amp=true",),
}


def train_once(
    args: argparse.Namespace,
    prepared: Any,
    data: tuple[list[Any], list[Any]],
    mode: str,
    steps: int,
    folder: Path,
) -> tuple[float, float]:
    """Train ``steps`` steps of ``data`` (training batches, dev batches) in ``mode``; the
    epoch's tokens/s and training loss."""
    overrides = [
        *args.overrides,
        *MODES[mode],
        f"train.device={args.device}",
        f"train.threads={args.threads}",
        f"train.max_steps={steps}",
        "train.epochs=1",
        f"run_dir={folder / mode}",
    ]
    config = load_config(args.config, overrides)
    train_batches, dev = data[0][:steps], data[1]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # e.g. a dropout mask kind that is for the CPU
        result = train(
            config,
            prepared.spec,
            lambda epoch: train_batches,
            lambda: dev,
            objective=prepared.task,
            vocabs=prepared.vocabs(),
            overwrite=True,
        )
    line = result.history[-1]
    return float(line["tokens_per_s"]), float(line["train_loss"])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", type=Path, default=Path("configs/translate_de_en.toml"))
    parser.add_argument("--set", dest="overrides", action="append", default=[])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--modes", nargs="+", choices=tuple(MODES), help="default: the device's")
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--dev", type=int, default=64, help="dev examples each run evaluates")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    cuda = torch.device(args.device).type == "cuda"
    modes = args.modes or (list(MODES) if cuda else ["float32"])
    if not cuda and modes != ["float32"]:
        parser.error(
            f"--modes {' '.join(modes)}: TF32 and bf16 are CUDA modes; on {args.device} "
            "only float32"
        )
    for name in ("steps", "repeats", "dev"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be at least 1, got {getattr(args, name)}")
    torch.set_num_threads(args.threads)
    config = load_config(args.config, list(args.overrides))
    prepared = prepare(config)
    data = (
        epoch_batches(config, prepared)(1),  # the first epoch's batches, as training has them
        prepared.batches_of(prepared.splits.dev[: args.dev]),
    )
    rates: dict[str, list[float]] = {mode: [] for mode in modes}
    losses: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        if args.warmup:
            train_once(args, prepared, data, "float32", args.warmup, folder / "warmup")
        for round_ in range(args.repeats):
            for mode in modes[round_ % len(modes) :] + modes[: round_ % len(modes)]:
                rate, loss = train_once(args, prepared, data, mode, args.steps, folder)
                rates[mode].append(rate)
                losses[mode] = loss
    medians = {mode: statistics.median(values) for mode, values in rates.items()}
    base = medians.get("float32")
    print(f"{args.config} on {args.device}, {args.steps} steps, {args.repeats} round(s)")
    print(f"{'mode':8} {'tokens/s':>10} {'÷ float32':>10} {'train loss':>11}")
    for mode in modes:
        ratio = f"{medians[mode] / base:.2f}" if base else "-"
        print(f"{mode:8} {medians[mode]:>10,.0f} {ratio:>10} {losses[mode]:>11.4f}")
    print(f"fastest: {max(medians, key=medians.__getitem__)}")


if __name__ == "__main__":
    main()
