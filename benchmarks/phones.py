"""Frame-level phone classification (the course's HW2) on ``phones-espeak``: every
baseline and the attention models at one budget, on voices never heard in training.

The lecture compares, for one phone label per 10 ms frame: an MLP on each frame alone
(``fc``), an MLP on ±k frames (``fc_window``, HW2's concatenated context), a BiGRU, a CNN,
and self-attention — the Transformer and the Conformer, each over the whole utterance and
truncated to ±``attention_size`` frames a layer (``model.attention = "window"``; lecture
000 §"Truncated self-attention": speech needs only a neighbourhood). Each row trains
``configs/phones_espeak.toml`` with only the architecture (and the attention) changed:
same size, epochs, schedule and seed; the best dev epoch is scored on the test voices.

Columns: frame accuracy; phone error rate (:func:`selfattn.speech.alignment.phone_error_rate`:
frame labels collapsed to phone strings, silence dropped, Levenshtein distance over
reference phones); parameters; the training loop's seconds (every epoch, dev scoring
included).

Usage::

    python benchmarks/phones.py --threads 1
    python benchmarks/phones.py --threads 1 --rows fc,transformer --set train.epochs=2

A run already finished under ``--out`` is read back instead of trained again.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

import torch

from run_cache import run_arguments, trained_row
from selfattn.speech.alignment import phone_error_rate
from selfattn.tasks import Predictor
from selfattn.train.loop import TrainResult

RESULT = "phones.json"
#: Truncated attention's half-width: ±8 frames (±80 ms) in every layer.
WINDOW = 8
_BASELINE = ["model.attention_dropout=none"]  # a field only attention models read
#: row name → its overrides of the config.
ROWS: dict[str, list[str]] = {
    "fc": ['model.architecture="fc"', *_BASELINE],
    "fc_window": ['model.architecture="fc_window"', *_BASELINE],
    "bigru": ['model.architecture="bigru"', *_BASELINE],
    "cnn": ['model.architecture="cnn"', *_BASELINE],
    "transformer": ['model.architecture="transformer"'],
    "transformer-window": [
        'model.architecture="transformer"',
        'model.attention="window"',
        f"model.attention_size={WINDOW}",
    ],
    "conformer": ['model.architecture="conformer"'],
    "conformer-window": [
        'model.architecture="conformer"',
        'model.attention="window"',
        f"model.attention_size={WINDOW}",
    ],
}


@torch.no_grad()
def test_phone_error_rate(predictor: Predictor) -> float:
    """The phone error rate of the model's frame labels on the test split."""
    task, model = predictor.task, predictor.model
    model.eval()
    examples = task.split_examples("test")  # type: ignore[attr-defined]  # a LabelTask
    predicted: list[list[str]] = []
    for batch in task.batches_of(examples):
        best = model(batch).argmax(-1)  # (B, L)
        lengths = (~batch.key_padding_mask).sum(-1).tolist()
        decode = task.labels.decode  # type: ignore[attr-defined]
        rows = zip(best, lengths, strict=True)
        predicted += [[decode(int(i)) for i in row[:n]] for row, n in rows]
    return phone_error_rate(predicted, [list(e.label) for e in examples])


def train_one(name: str, args: argparse.Namespace) -> dict[str, Any]:
    """Train one row's run, or read its saved result."""

    def describe(result: TrainResult, predictor: Predictor) -> dict[str, Any]:
        metrics = predictor.evaluate("test")
        return {
            "row": name,
            "test_accuracy": metrics["accuracy"],
            "test_frames": metrics["count"],
            "phone_error_rate": test_phone_error_rate(predictor),
            "parameters": sum(p.numel() for p in predictor.model.parameters()),
            "train_seconds": sum(row["seconds"] for row in result.history),
            "dev_accuracy": (result.best or {}).get("dev_accuracy"),
        }

    return trained_row(args, name, ROWS[name], describe, RESULT)


def main() -> None:
    parser = run_arguments(__doc__, "configs/phones_espeak.toml", "runs/phones")
    parser.add_argument("--rows", default=",".join(ROWS), help=f"of {', '.join(ROWS)}")
    args = parser.parse_args()
    unknown = [name for name in args.rows.split(",") if name not in ROWS]
    if unknown:
        parser.error(f"--rows: unknown {', '.join(unknown)}; choose from {', '.join(ROWS)}")
    rows = []
    for name in args.rows.split(","):
        rows.append(train_one(name, args))
        print(json.dumps(rows[-1]), flush=True)
    print(f"\n{args.config} (seed {args.seed}), test voices, best dev epoch:\n")
    print("| model | frame accuracy | phone error rate | parameters | train s | epoch |")
    print("| --- | --- | --- | --- | --- | --- |")
    for row in rows:
        print(
            f"| {row['row']} | {row['test_accuracy']:.3f} | {row['phone_error_rate']:.3f} | "
            f"{row['parameters']:,} | {row['train_seconds']:.0f} | "
            f"{row['best_epoch']} of {row['epochs']} |"
        )


if __name__ == "__main__":
    main()
