"""Compiled training and inference (``train.compile = true``, ``--compile`` on ``eval`` and
``predict``): :func:`compile_model` hands the model's forward to ``torch.compile`` in place
(:meth:`torch.nn.Module.compile`), so its backward is compiled too, and the model object,
its ``state_dict`` keys (no ``_orig_mod.`` prefix) and its checkpoints stay those of an
eager run: a run trained compiled resumes eager and the other way round.

What is compiled: the forward of a task model (what the loss calls, ``model(batch)``); for
an encoder–decoder, whose loss calls ``encode`` and ``decode`` rather than the forward,
its encoder and decoder stacks. The shapes are compiled as dynamic (:data:`DYNAMIC`): the
batch size and length are symbols of one graph, so batches of every length bucket (and
the epoch's short last batch) run the same code instead of compiling a graph each.

:class:`CompileWatch` reads what compiling cost from ``torch._dynamo``'s counters: the
seconds spent (the forward graphs and, lazily at the first backward, the backward ones),
the frames compiled, and the recompilations among them (a frame compiled again because
its guards failed: what the dynamic shapes keep at a small bound).

The linear layers train by oneDNN's linear as in an eager run (``model.linear_layers``):
it is an operator of its own (:func:`~selfattn.attention.packed_linear.onednn_linear`)
that Inductor calls whole, fusing the elementwise work around it, so compiled and eager
steps run the same matrix products.

The architectures that do not compile are refused when the configuration is read
(:data:`~selfattn.config.sections.NOT_COMPILED`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from torch import nn

from selfattn.config.sections import check_compiles

#: ``torch.compile``'s backend: Inductor generates fused C++ (CPU, OpenMP) or Triton (CUDA)
#: kernels. Tests set ``"aot_eager"`` (the same graphs, traced forward and backward, run by
#: eager kernels) where they check the plumbing rather than the generated code.
BACKEND = "inductor"
#: Compile with symbolic batch size and length from the first batch (``None`` would compile
#: the first shape static and recompile once a second one comes).
DYNAMIC: bool | None = True
#: Inductor's options: dropout's random numbers drawn by PyTorch's own generator (the
#: kernels eager runs) rather than Inductor's per-element Philox, which on the CPU took a
#: d256 training step more time than all its other generated kernels together.
OPTIONS: dict[str, str | int | bool] = {"fallback_random": True}


def options() -> dict[str, str | int | bool] | None:
    """:data:`OPTIONS` where the backend is Inductor (the only one that takes them)."""
    return dict(OPTIONS) if BACKEND == "inductor" else None


def compiled_parts(model: nn.Module) -> list[nn.Module]:
    """The modules whose forward :func:`compile_model` compiles: the model's own, or for
    an encoder–decoder (whose loss goes through ``encode`` / ``decode``) its encoder and
    decoder."""
    from selfattn.models.encoder_decoder import EncoderDecoderModule

    if isinstance(model, EncoderDecoderModule):
        return [model.get_submodule(name) for name in ("encoder", "decoder")]
    return [model]


def compile_model(model: nn.Module, architecture: str, asked: str = "train.compile = true") -> None:
    """Compile ``model`` in place (see the module docstring); the first call of each part
    compiles it.

    Raises:
        ValueError: ``architecture`` does not compile
            (:data:`~selfattn.config.sections.NOT_COMPILED`): one line naming ``asked``,
            the field or flag that asked, and why.
    """
    check_compiles(architecture, asked)
    for part in compiled_parts(model):
        part.compile(backend=BACKEND, dynamic=DYNAMIC, options=options())


def _compiled_code() -> dict[int, int]:
    """The code objects ``torch._dynamo`` has met (by id) with the graphs it holds for each
    (a code compiled again after a guard failed holds one more)."""
    from torch._dynamo import convert_frame
    from torch._dynamo.eval_frame import _debug_get_cache_entry_list

    held = {}
    for ref in convert_frame.input_codes.seen:
        code = ref()
        if code is not None:
            held[id(code)] = len(_debug_get_cache_entry_list(code))
    return held


def _seconds() -> float:
    """Seconds this process has spent compiling: the forward graphs and, at their first
    backward, the backward ones."""
    from torch._dynamo import utils

    return utils.calculate_time_spent().get("total_wall_time", 0.0)


@dataclass
class CompileWatch:
    """What compiling has cost since :meth:`start`: :attr:`seconds`, :attr:`graphs` and
    :attr:`recompilations`."""

    _seconds: float = field(default_factory=_seconds)
    _held: dict[int, int] = field(default_factory=_compiled_code)
    reported: bool = False

    @classmethod
    def start(cls) -> CompileWatch:
        """Count from now."""
        return cls()

    @property
    def seconds(self) -> float:
        """Seconds spent compiling (forward and backward graphs)."""
        return _seconds() - self._seconds

    def _new(self) -> tuple[int, int]:
        """Graphs compiled since :meth:`start`, and the recompilations among them."""
        graphs = recompiled = 0
        for code, held in _compiled_code().items():
            before = self._held.get(code, 0)
            if held > before:
                graphs += held - before
                recompiled += held - before - (before == 0)
        return graphs, recompiled

    @property
    def graphs(self) -> int:
        """Graphs compiled (one per Python frame and guard set; a graph break starts
        another frame)."""
        return self._new()[0]

    @property
    def recompilations(self) -> int:
        """Graphs compiled for a frame that had one already, because its guards failed:
        a shape the dynamic graph could not take, gradients switched off for evaluation,
        a changed Python value."""
        return self._new()[1]

    def line(self) -> str:
        """The console's line: ``torch.compile (inductor): 12.3 s compiling 2 graphs (1
        recompiled)``."""
        graphs, recompiled = self._new()
        return (
            f"torch.compile ({BACKEND}): {self.seconds:.1f} s compiling "
            f"{graphs} {'graph' if graphs == 1 else 'graphs'} ({recompiled} recompiled)"
        )


def compile_for_inference(model: nn.Module, architecture: str) -> CompileWatch:
    """``--compile`` of ``eval`` / ``predict``: compile ``model`` in place; returns the
    watch that says what compiling cost once the inputs have run.

    Raises:
        ValueError: ``architecture`` does not compile; an encoder–decoder (its decoding
            steps the decoder through a key/value cache and packed weights, which
            ``torch.compile`` does not trace: tried, it fails inside the compiler).
    """
    from selfattn.models.encoder_decoder import EncoderDecoderModule

    if isinstance(model, EncoderDecoderModule):
        raise ValueError(
            "--compile: a seq2seq model decodes step by step through a key/value cache, "
            "which runs eager (train.compile compiles its training)"
        )
    watch = CompileWatch.start()
    compile_model(model, architecture, "--compile")
    return watch
