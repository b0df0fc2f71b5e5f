"""A run folder's model as a file that runs without selfattn: ONNX (checked with
onnxruntime) or a ``torch.export`` program (``.pt2``), with a JSON sidecar that says what
to feed it.

Every export is verified before it is reported: the file is loaded back and run on random
padded inputs of three lengths and batch sizes, and its outputs must be within
:data:`TOLERANCE` of the PyTorch model's (token outputs compared at real positions only).
What cannot be exported is refused in one line naming why (:func:`refusal`).
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn
from torch.export import Dim

from selfattn.export.wrapper import Exportable, SubwordModel, wrap
from selfattn.kernels.linformer import LinformerKernel
from selfattn.kernels.lsh import LSHKernel
from selfattn.kernels.nystrom import NystromKernel
from selfattn.kernels.window import WindowKernel
from selfattn.models.architectures.graph import GraphSequenceEncoder
from selfattn.models.composed import TaskModel
from selfattn.models.pretrained import PretrainedTaskModel
from selfattn.specials import PAD, PAD_ID, UNK, UNK_ID

#: The largest |exported − PyTorch| accepted by the verification.
TOLERANCE = 1e-4

#: Output file formats (``hf`` is :func:`selfattn.export.export_hf`, a folder).
FILE_FORMATS = ("onnx", "torch-export")

#: Kernels whose computation changes with the input length, so one traced graph with a
#: dynamic length cannot hold them (what ``torch.export`` reported when tried).
UNTRACEABLE_KERNELS: dict[type[nn.Module], str] = {
    WindowKernel: "its query block size is min(block, length), a shape that changes "
    "with the length",
    LSHKernel: "its bucket count and chunking are computed from the length",
    NystromKernel: "its landmark count min(num_landmarks, length) changes with the length",
}

# Verification shapes: (batch size, length); lengths are clipped to the model's range.
_CHECKS = ((1, 5), (3, 17), (2, 40))


def refusal(model: nn.Module, task_name: str) -> str | None:
    """Why ``model`` cannot be exported as ONNX or ``torch.export``, or ``None``."""
    if task_name == "seq2seq":
        return (
            "a seq2seq model cannot be exported: decoding is a loop over generated tokens; "
            "export the encoder-based token and sequence tasks"
        )
    for module in model.modules():
        if isinstance(module, GraphSequenceEncoder):
            return (
                "a graph model cannot be exported: its edge attention checks the edge list's "
                "values and scatters over a data-dependent number of edges, which "
                "torch.export cannot trace"
            )
        for kernel, why in UNTRACEABLE_KERNELS.items():
            if isinstance(module, kernel):
                name = getattr(module, "name", kernel.__name__)
                return (
                    f"attention kernel {name!r} cannot be exported with a dynamic length: "
                    f"{why}; export a model with attention dense, linear, performer or linformer"
                )
    return None


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """The exporters' progress lines, warnings and log messages kept off the terminal: the
    command's output is its one summary line."""
    logger = logging.getLogger("torch.onnx")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
            warnings.simplefilter("ignore")
            yield
    finally:
        logger.setLevel(level)


def length_range(exportable: Exportable, max_len: int, model: nn.Module) -> tuple[int, int]:
    """The lengths the exported graph accepts: 1 … the run's ``max_len`` (or a positional
    table's end; a model fine-tuned from BERT: the checkpoint's positions); Linformer's
    projections one fewer (``torch.export`` cannot trace a slice of them that may be the
    whole table)."""
    if exportable.fixed_length:
        assert exportable.max_length is not None
        return exportable.max_length, exportable.max_length
    if isinstance(exportable.module, SubwordModel):  # max_len counts words, not wordpieces
        max_len = exportable.max_length or max_len
    longest = min(max_len, exportable.max_length or max_len)
    if any(isinstance(module, LinformerKernel) for module in model.modules()):
        longest -= 1
    return 1, longest


def dynamic_shapes(exportable: Exportable, lengths: tuple[int, int]) -> dict[str, Any]:
    """``torch.export`` dimensions: batch always dynamic, length unless fixed."""
    batch = Dim("batch", min=1, max=1 << 16)
    length = None if exportable.fixed_length else Dim("length", min=lengths[0], max=lengths[1])
    words = Dim("words", min=1, max=lengths[1])
    shapes: dict[str, Any] = {}
    for spec in exportable.inputs:
        axes: dict[int, Any] = {0: batch}
        if spec.shape[1] == "length" and length is not None:
            axes[1] = length
        elif spec.shape[1] == "words":
            axes[1] = words
        shapes[spec.name] = axes
    return shapes


def export_file(
    exportable: Exportable,
    fmt: str,
    path: Path,
    lengths: tuple[int, int],
) -> tuple[Callable[..., Tensor], dict[str, Any]]:
    """Write ``exportable`` to ``path`` as ``fmt``; returns a runner of the written file
    (tensors in, logits out) and facts for the sidecar (``opset``)."""
    generator = torch.Generator().manual_seed(0)
    example = exportable.example_inputs(2, min(max(lengths[0], 9), lengths[1]), generator=generator)
    shapes = dynamic_shapes(exportable, lengths)
    with torch.no_grad(), quiet():
        if fmt == "torch-export":
            program = torch.export.export(exportable.module, example, dynamic_shapes=shapes)
            torch.export.save(program, path)
        else:
            onnx_export(exportable, example, shapes, path)
    if fmt == "torch-export":
        with quiet():
            loaded = torch.export.load(path).module()
        return (lambda *inputs: loaded(*inputs)), {}
    return onnx_runner(exportable, path)


def onnx_export(
    exportable: Exportable, example: tuple[Tensor, ...], shapes: dict[str, Any], path: Path
) -> None:
    """``torch.onnx.export`` (the dynamo exporter) into one file."""
    try:
        import onnx  # noqa: F401
        import onnxscript  # noqa: F401
    except ImportError:
        raise ValueError("--format onnx needs onnx: pip install onnx onnxscript") from None
    torch.onnx.export(
        exportable.module,
        example,
        path,
        dynamo=True,
        dynamic_shapes=shapes,
        input_names=[spec.name for spec in exportable.inputs],
        output_names=[exportable.output.name],
        external_data=False,
        verbose=False,
    )


def onnx_runner(exportable: Exportable, path: Path) -> tuple[Callable[..., Tensor], dict[str, Any]]:
    """An onnxruntime session on ``path`` as a function of tensors, and the opset."""
    import onnx

    try:
        import onnxruntime
    except ImportError:
        raise ValueError(
            "verifying an ONNX export needs onnxruntime: pip install onnxruntime"
        ) from None
    opset = next(
        entry.version for entry in onnx.load(path).opset_import if entry.domain in ("", "ai.onnx")
    )
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = torch.get_num_threads()
    options.inter_op_num_threads = 1
    session = onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    names = [spec.name for spec in exportable.inputs]

    def run(*inputs: Tensor) -> Tensor:
        feed = {name: value.numpy() for name, value in zip(names, inputs, strict=True)}
        return torch.from_numpy(session.run(None, feed)[0])

    return run, {"opset": opset}


def verify(
    exportable: Exportable, run: Callable[..., Tensor], lengths: tuple[int, int]
) -> tuple[float, list[int]]:
    """The largest |``run`` − PyTorch| over random padded inputs of three lengths and batch
    sizes (token outputs: real positions only), and those lengths.

    Raises:
        ValueError: a difference above :data:`TOLERANCE`.
    """
    generator = torch.Generator().manual_seed(1)
    worst, checked = 0.0, []
    for batch_size, length in _CHECKS:
        length = min(max(length, lengths[0]), lengths[1])
        inputs = exportable.example_inputs(batch_size, length, generator=generator)
        with torch.no_grad():
            expected = exportable.module(*inputs)
            got = run(*inputs)
        difference = (got - expected).abs()
        if difference.dim() == 3 and "padding_mask" in [s.name for s in exportable.inputs]:
            mask = inputs[[s.name for s in exportable.inputs].index("padding_mask")]
            difference = difference[~mask]
        worst = max(worst, float(difference.max()))
        checked.append(length)
    if not worst <= TOLERANCE:  # NaN fails too
        raise ValueError(
            f"the exported model differs from the PyTorch model by {worst:.2g} "
            f"(more than {TOLERANCE:g}) on lengths {', '.join(map(str, checked))}"
        )
    return worst, sorted(set(checked))


def sidecar(
    exportable: Exportable,
    task: Any,
    fmt: str,
    path: Path,
    lengths: tuple[int, int],
    facts: dict[str, Any],
) -> dict[str, Any]:
    """What a user needs to feed the exported file without selfattn."""
    info: dict[str, Any] = {
        "format": fmt,
        "file": path.name,
        "weights": "float32",
        **facts,
        "task": task.name,
        "inputs": [
            {"name": spec.name, "dtype": spec.dtype, "shape": list(spec.shape)}
            for spec in exportable.inputs
        ],
        "output": {
            "name": exportable.output.name,
            "dtype": exportable.output.dtype,
            "shape": list(exportable.output.shape),
        },
        "length": {"min": lengths[0], "max": lengths[1]},
        "padding": "padding_mask is True at padding; ids there are 0 (<pad>)",
    }
    labels = getattr(task, "labels", None)
    if task.name in ("token", "sequence", "multilabel") and labels is not None:
        info["labels"] = list(labels.labels)
    if task.name == "multilabel":
        info["decision"] = "one logit per label: the set holds the labels with sigmoid >= 0.5"
    vocab = getattr(task, "vocab", None)
    if vocab is not None:
        stored = vocab.to_dict()
        tokens = [PAD, UNK, *stored["tokens"]]
        info["vocab"] = {
            "token_to_id": {token: index for index, token in enumerate(tokens)},
            "lowercase": stored["lowercase"],
            "pad_id": PAD_ID,
            "unk_id": UNK_ID,
        }
    chars = getattr(task, "chars", None)
    if chars is not None and any(spec.name == "char_ids" for spec in exportable.inputs):
        stored = chars.to_dict()
        info["chars"] = {
            "char_to_id": {c: index for index, c in enumerate([PAD, UNK, *stored["chars"]])},
            "max_word_len": stored["max_word_len"],
            "note": "each word's first max_word_len characters, right-padded with 0",
        }
    pretrained = getattr(task, "pretrained", None)
    if pretrained is not None:
        info["padding"] = "attention_mask is 1 at real wordpieces, 0 at padding ([PAD])"
        info["wordpiece_tokenizer"] = pretrained.tokenizer.plain_json()
        if task.name == "token":
            info["first"] = "per word, the position of its first wordpiece ([CLS] is 0)"
    bpe = getattr(task, "bpe", None)
    if bpe is not None:
        info["bpe_tokenizer"] = bpe.to_str()
    return info


def exportable_of(model: TaskModel | PretrainedTaskModel, task: Any) -> Exportable:
    """:func:`wrap` of a loaded run's ``model``, its words as long as ``task`` cuts them."""
    chars = getattr(task, "chars", None)
    return wrap(model, word_length=chars.max_word_len if chars is not None else 16)


def export_run(model: nn.Module, task: Any, max_len: int, fmt: str, path: Path) -> str:
    """Export a loaded run's ``model`` as ``fmt`` to ``path``, verify it, write
    ``PATH.json``; returns the one-line summary.

    Raises:
        ValueError: a model that cannot be exported (:func:`refusal`), or an export that
            does not match the PyTorch model.
    """
    why = refusal(model, task.name)
    if why:
        raise ValueError(why)
    if not isinstance(model, TaskModel | PretrainedTaskModel):
        raise ValueError(
            f"a {type(model).__name__} cannot be exported as {fmt}: only selfattn's task "
            "models (embedding, encoder, head) are"
        )
    exportable = exportable_of(model, task)
    lengths = length_range(exportable, max_len, model)
    try:
        run, facts = export_file(exportable, fmt, path, lengths)
    except Exception as error:  # the tracer's errors are many kinds; say its first words
        if isinstance(error, OSError) and error.filename is not None:  # a file, not the model
            raise ValueError(f"{error.filename}: cannot write ({error.strerror})") from None
        first = " ".join(str(error).split())[:300]
        raise ValueError(f"this model cannot be exported as {fmt}: {first}") from None
    try:
        worst, checked = verify(exportable, run, lengths)
    except ValueError as error:
        path.unlink()
        raise ValueError(f"{error}; {path} was not kept") from None
    info = sidecar(exportable, task, fmt, path, lengths, facts)
    Path(f"{path}.json").write_text(json.dumps(info, indent=2, ensure_ascii=False) + "\n")
    kind = f"{fmt}, opset {facts['opset']}" if "opset" in facts else fmt
    runtime = "onnxruntime" if fmt == "onnx" else "torch.export"
    inputs = ", ".join(spec.describe() for spec in exportable.inputs)
    return (
        f"wrote {path} ({kind}): inputs {inputs}; outputs {exportable.output.describe()}; "
        f"max |{runtime} − torch| = {worst:.1e} over lengths {', '.join(map(str, checked))}"
    )
