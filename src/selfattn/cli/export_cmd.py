"""``selfattn export RUN --format onnx|torch-export|hf -o PATH [--quantize int8]``: a
trained model as a file that runs without selfattn (a thin layer over
:mod:`selfattn.export`)."""

from __future__ import annotations

import argparse
from pathlib import Path

DESCRIPTION = """\
Export a trained run's model. onnx and torch-export write one file (tensors in, logits
out: token_ids or features, and padding_mask True at padding; a model fine-tuned from
BERT: input_ids and attention_mask, and a tagger's first wordpiece of each word; batch and
length dynamic)
and PATH.json beside it with the inputs, outputs, labels and vocabulary; the file is run
on random padded inputs and must match the PyTorch model within 1e-4. hf writes a Hugging
Face BERT folder (config.json, model.safetensors, tokenizer.json) for a model fine-tuned
from a BERT checkpoint. --quantize int8 (onnx) stores int8 weights (ONNX Runtime's dynamic
quantisation) and keeps the file only if the run's dev accuracy (or F1) is within 0.5
points of float32's, both scored through ONNX Runtime and printed. Seq2seq and graph
models, and the window, lsh and nystrom attention kernels, are refused (their computation
is not one fixed graph)."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``selfattn export``."""
    parser.description = DESCRIPTION
    parser.add_argument(
        "run_dir", type=Path, metavar="RUN", help="a run folder (or a checkpoint folder)"
    )
    parser.add_argument(
        "--format",
        required=True,
        metavar="FORMAT",
        help="onnx (a .onnx file), torch-export (a .pt2 file of torch.export.save) or hf "
        "(a Hugging Face BERT folder)",
    )
    parser.add_argument(
        "-o",
        "--output",
        required=True,
        type=Path,
        metavar="PATH",
        help="the file or folder to write",
    )
    parser.add_argument(
        "--quantize",
        metavar="int8",
        help="onnx only: int8 weights (ONNX Runtime's dynamic quantisation), kept only if "
        "the dev accuracy is within 0.5 points of float32's (both printed)",
    )


def run(args: argparse.Namespace) -> int:
    """Export, then print the one-line summary."""
    from selfattn.export import export

    print(export(args.run_dir, args.format, args.output, quantize=args.quantize))
    return 0
