"""A trained run's model as a file that runs without selfattn: ONNX (float32, or int8
weights kept only when the dev score stays within half a point), a ``torch.export``
program, or (a model fine-tuned from BERT) a Hugging Face BERT folder.

>>> print(export("runs/pos", "onnx", "pos.onnx"))  # also writes pos.onnx.json
wrote pos.onnx (onnx, opset 18): inputs token_ids (batch, length), padding_mask (batch, ...
>>> print(export("runs/pos", "onnx", "pos.int8.onnx", quantize="int8"))
wrote pos.int8.onnx (onnx, opset 18, int8 weights: 1.2 MB, float32 3.9 MB): dev accuracy ...
"""

from __future__ import annotations

import os
from pathlib import Path

from selfattn.export.exporters import FILE_FORMATS, TOLERANCE, export_run, refusal
from selfattn.export.hf import bert_of, export_hf
from selfattn.export.quantize import MAX_DROP, QUANTIZATIONS, check_quantize, export_int8
from selfattn.export.wrapper import Exportable, TensorSpec, wrap

__all__ = [
    "FORMATS",
    "MAX_DROP",
    "QUANTIZATIONS",
    "TOLERANCE",
    "Exportable",
    "TensorSpec",
    "export",
    "export_hf",
    "export_run",
    "refusal",
    "wrap",
]

#: What ``selfattn export --format`` accepts.
FORMATS = (*FILE_FORMATS, "hf")


def export(run_dir: str | Path, fmt: str, out: str | Path, *, quantize: str | None = None) -> str:
    """Export the model of a run folder; returns the one-line summary.

    Args:
        run_dir: a run folder (or a checkpoint folder).
        fmt: ``"onnx"`` (a ``.onnx`` file), ``"torch-export"`` (a ``.pt2`` file) or
            ``"hf"`` (a Hugging Face BERT folder; a model fine-tuned from a BERT checkpoint).
        out: the file (or, for ``hf``, the folder) to write; its folder must exist.
        quantize: ``"int8"`` (``onnx`` only): int8 weights by ONNX Runtime's dynamic
            quantisation, written only if the run's main dev metric is within
            :data:`MAX_DROP` points of the float32 file's (both scored through ONNX
            Runtime; the summary prints both).

    Raises:
        ValueError: an unknown format, a missing output folder, an output that cannot be
            written (checked before the model is loaded), a RUN that is not a run folder,
            a model that cannot be exported in this format (one line: why), or an export
            that does not match the PyTorch model; a ``quantize`` other than int8 or with
            another format, or an int8 file that loses more than :data:`MAX_DROP`.
    """
    if fmt not in FORMATS:
        raise ValueError(f"unknown format {fmt!r}; choose one of {', '.join(FORMATS)}")
    if quantize is not None:
        check_quantize(quantize, fmt)
    path = Path(out)
    if not path.parent.is_dir():
        raise ValueError(f"{path}: its folder {path.parent} does not exist")
    if fmt != "hf" and path.is_dir():
        raise ValueError(f"{path}: is a folder; give the file to write")
    check_writable(path, folder=fmt == "hf")
    from selfattn.tasks import Predictor  # the whole pipeline: only when exporting

    predictor = Predictor(run_dir)
    model, task = predictor.model.eval(), predictor.task
    if fmt == "hf":
        bert = bert_of(model)
        if bert is None:
            raise ValueError(
                "only a model fine-tuned from a BERT checkpoint (model.pretrained) has BERT's "
                f"shape: this is a {predictor.config.model.architecture} model; export it with "
                "--format onnx or torch-export"
            )
        pretrained = getattr(task, "pretrained", None)
        tokenizer = None if pretrained is None else pretrained.tokenizer.plain_json()
        export_hf(bert, path, tokenizer)
        written = "config.json, model.safetensors" + (", tokenizer.json" if tokenizer else "")
        return f"wrote {path} (hf: {written}); load it with transformers.BertModel"
    if quantize is not None:
        return export_int8(model, task, predictor.spec.max_len, path)
    return export_run(model, task, predictor.spec.max_len, fmt, path)


def check_writable(path: Path, *, folder: bool) -> None:
    """Refuse in one line naming ``path`` an output that cannot be written: a file that
    cannot be opened for writing (tried, and removed again if it was not there), or a
    ``folder`` whose parent (or itself, if it exists) is not writable."""
    if folder:
        where = path if path.exists() else path.parent
        if not os.access(where, os.W_OK | os.X_OK):
            raise ValueError(f"{path}: cannot write ({where}: Permission denied)")
        return
    existed = path.exists()
    try:
        open(path, "ab").close()  # opened for writing, nothing written
    except OSError as error:
        raise ValueError(f"{path}: cannot write ({error.strerror})") from None
    if not existed:
        path.unlink()
