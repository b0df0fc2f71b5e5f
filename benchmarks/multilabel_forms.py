"""The two forms of multi-label classification (lecture 001, "the machine decides how many
labels") on one split, label by label: a sigmoid head's run and a seq2seq run trained on
the same label sets (``configs/wsj_constructions.toml`` and
``configs/wsj_constructions_seq2seq.toml``).

For each run it prints the set metrics ``selfattn eval`` gives and the time ``predict``
takes per example (one at a time; seq2seq decodes with its config's method), then per
label the F1 of its yes/no decisions over the split, and how many labels the model gave
against the gold sets (mean set size, the share of empty sets, the share of sets of the
right size)::

    python benchmarks/multilabel_forms.py runs/wsj_constructions runs/wsj_constructions_seq2seq
"""

from __future__ import annotations

import argparse
import dataclasses
import time
from pathlib import Path

import torch

from selfattn.data.readers.label_sets import decoded_set
from selfattn.specials import NO_LABELS
from selfattn.tasks.predictor import Predictor
from selfattn.tasks.set_metrics import set_f1, set_scores


def predicted_sets(
    predictor: Predictor, split: str
) -> tuple[list[set[str]], list[set[str]], float]:
    """What ``predictor`` gives for every example of ``split`` (one at a time, as
    ``predict`` does), the gold sets, and the seconds the predictions took."""
    task = predictor.task
    examples = getattr(task.load_splits(), split)  # as the task reads it (seq2seq: targets)
    bpe = getattr(task, "bpe", None)  # a model with data.bpe_vocab_size reads subwords
    if bpe is not None:
        examples = [
            dataclasses.replace(
                e, tokens=tuple(bpe.encode(list(e.tokens), is_pretokenized=True).tokens)
            )
            for e in examples
        ]
    predicted, gold, seconds = [], [], 0.0
    for example in examples:
        started = time.perf_counter()
        output = predictor.predict(task.unlabelled(example))
        seconds += time.perf_counter() - started
        if task.name == "multilabel":
            chosen = output.split("\t")[0]
            predicted.append(set() if chosen == NO_LABELS else set(chosen.split(",")))
        else:
            predicted.append(set(decoded_set(output.split())))
        gold.append(set(decoded_set(example.label)))
    return predicted, gold, seconds


def report(run: Path, split: str) -> None:
    predictor = Predictor(run)
    predicted, gold, seconds = predicted_sets(predictor, split)
    scores = set_scores(predicted, gold)
    print(f"## {run} ({predictor.task.name}), {split}: {int(scores['count'])} examples")
    print(
        f"set F1 {scores['set_f1']:.4f}  micro F1 {scores['micro_f1']:.4f}  "
        f"exact match {scores['exact_match']:.4f}  "
        f"{1000 * seconds / len(predicted):.1f} ms per example"
    )
    labels = sorted(set().union(*gold, *predicted))
    print("| label | gold | predicted | F1 |")
    print("| --- | --- | --- | --- |")
    for label in labels:
        said = {i for i, p in enumerate(predicted) if label in p}
        true = {i for i, g in enumerate(gold) if label in g}
        f1 = set_f1({str(i) for i in said}, {str(i) for i in true})  # 2TP / (|said| + |true|)
        print(f"| {label} | {len(true)} | {len(said)} | {f1:.3f} |")
    sizes = torch.tensor([len(p) for p in predicted], dtype=torch.float)
    gold_sizes = torch.tensor([len(g) for g in gold], dtype=torch.float)
    empty, gold_empty = float((sizes == 0).float().mean()), float((gold_sizes == 0).float().mean())
    print(
        f"mean set size {sizes.mean():.2f} (gold {gold_sizes.mean():.2f}); empty sets "
        f"{empty:.3f} (gold {gold_empty:.3f}); "
        f"right size {float((sizes == gold_sizes).float().mean()):.3f}\n"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", type=Path, nargs="+", help="run folders (multilabel or seq2seq)")
    parser.add_argument("--split", default="test", choices=("train", "dev", "test"))
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    for run in args.runs:
        report(run, args.split)


if __name__ == "__main__":
    main()
