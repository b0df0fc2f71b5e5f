"""Compiled training (``train.compile = true``) and ``--compile`` on eval / predict: the same
losses as eager to float tolerance over 20 steps, a bounded number of graphs for batches
of every length, checkpoints an eager run resumes (and the other way round), and the
architectures that do not compile refused in one line when the configuration is read.

Compiling costs seconds per graph, so one module fixture trains the few tiny runs that
every test here reads."""

from __future__ import annotations

import contextlib
import io
import json
import re
import warnings
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from selfattn.cli.main import main
from selfattn.config import load_config
from selfattn.config.sections import NOT_COMPILED
from selfattn.models.spec import TaskSpec
from selfattn.train import compile as compiling
from selfattn.train.run_dir import check_compatible

from ..helpers_cli import one_line_error, write_config
from ..tiny_runs import train_config, write_reviews, write_tiny_config

#: 60 reviews: 54 train (batches of 11, 11, 11, 11, 10: five steps an epoch), 6 dev; four
#: epochs are 20 steps, then two more after resuming. A constant learning rate, so that a
#: run of 4 epochs resumed to 6 is the first 4 epochs of a run of 6.
BATCH, FIRST, LAST = 11, 4, 6
COMPILE = "train.compile=true"
#: The console's compile line.
COMPILED = re.compile(
    r"torch\.compile \(inductor\): [\d.]+ s compiling (\d+) graphs? \((\d+) recompiled\)"
)


def _weights(run_dir: Path) -> dict[str, torch.Tensor]:
    (path,) = (run_dir / "last").glob("model-*.safetensors")
    return load_file(path)


def _losses(run_dir: Path) -> list[float]:
    """Each epoch's training and dev loss, in order."""
    lines = (run_dir / "metrics.jsonl").read_text(encoding="utf-8").splitlines()
    return [line[key] for line in map(json.loads, lines) for key in ("train_loss", "dev_loss")]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    """A tiny run trained 20 steps eager then resumed compiled, and one trained compiled
    then resumed eager; what the compiled parts printed."""
    folder = tmp_path_factory.mktemp("compile")
    config = write_tiny_config(folder, write_reviews(folder / "reviews.csv", 60), batch_size=BATCH)
    first = (f"train.epochs={FIRST}", 'train.schedule="constant"')
    last = (f"train.epochs={LAST}", 'train.schedule="constant"')
    printed = []
    for name, compiled_first in (("eager", False), ("compiled", True)):
        for settings, compiled in ((first, compiled_first), (last, not compiled_first)):
            out = io.StringIO()
            with contextlib.redirect_stderr(out), contextlib.redirect_stdout(out):
                flags = (*settings, COMPILE) if compiled else settings
                status = train_config(config, folder / name, *flags, resume=settings is last)
            assert status == 0, out.getvalue()
            if compiled:
                printed.append(out.getvalue())
    return {"folder": folder, "printed": printed}


def test_compiled_training_matches_eager_and_checkpoints_interchange(
    runs: dict[str, object],
) -> None:
    """20 steps compiled give the losses (train and dev) of 20 eager steps to float
    tolerance; the compiled run's checkpoint resumes eager and the eager one's compiled,
    to the same losses and weights; the checkpoints hold the eager model's keys (no
    ``_orig_mod.`` prefix)."""
    folder = runs["folder"]
    assert isinstance(folder, Path)
    eager, compiled = _losses(folder / "eager"), _losses(folder / "compiled")
    assert len(eager) == len(compiled) == 2 * LAST
    assert compiled == pytest.approx(eager, rel=1e-4, abs=1e-6)
    weights, reference = _weights(folder / "compiled"), _weights(folder / "eager")
    assert weights.keys() == reference.keys()
    assert not any("_orig_mod" in key for key in weights)
    # AdamW divides each gradient by its own scale: where a gradient is near 0 its float
    # rounding moves the weight by up to lr (1e-3) a step, either way.
    for key, value in weights.items():
        torch.testing.assert_close(value, reference[key], rtol=0, atol=3e-3)


def test_batches_of_every_length_run_a_few_graphs(runs: dict[str, object]) -> None:
    """Steps of batches of two sizes and several lengths, and the dev set, compiled: one
    line on the console with the compile time and the graphs compiled; the dynamic shapes
    keep them to a training and an evaluation graph (gradients off), not one per batch
    shape. The second compiled run (another model of the same architecture, in the same
    process) reuses them."""
    texts = runs["printed"]
    assert isinstance(texts, list) and len(texts) == 2
    counts = []
    for printed in texts:
        lines = [line for line in printed.splitlines() if "torch.compile" in line]
        assert len(lines) == 1, printed
        found = COMPILED.search(lines[0])
        assert found, lines[0]
        counts.append((int(found[1]), int(found[2])))
    (graphs, recompiled), (again, _) = counts
    assert 1 <= graphs <= 3 and recompiled <= 2 and again <= 1, counts


def test_eval_and_predict_compiled_give_the_eager_answers(
    runs: dict[str, object], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--compile`` (traced by ``aot_eager`` here: the plumbing, not Inductor's code, which
    the training test checks) gives eager's metrics and prediction, and says on stderr
    what compiling took."""
    monkeypatch.setattr(compiling, "BACKEND", "aot_eager")
    folder = runs["folder"]
    assert isinstance(folder, Path)
    run = folder / "eager"
    results = []
    for flags in ([], ["--compile"]):
        assert main(["eval", str(run), "--split", "dev", *flags]) == 0
        assert main(["predict", str(run), "a warm funny film", *flags]) == 0
        captured = capsys.readouterr()
        metrics, prediction = captured.out.strip().splitlines()
        results.append((json.loads(metrics), prediction))
        assert captured.err.count("torch.compile (aot_eager)") == 2 * len(flags), captured.err
    (eager_metrics, eager_prediction), (metrics, prediction) = results
    assert metrics.keys() == eager_metrics.keys()
    for key, value in metrics.items():
        assert value == (pytest.approx(eager_metrics[key], rel=1e-5) if key != "split" else "dev")
    assert prediction.split()[0] == eager_prediction.split()[0]  # the label, then its probability
    exit_eval = ["eval", str(run), "--exit-threshold", "0.5", "--compile"]
    assert "early-exit evaluation runs its model eager" in one_line_error(capsys, exit_eval)


def test_train_compile_is_a_checked_boolean(tmp_path: Path) -> None:
    config = write_tiny_config(tmp_path, tmp_path / "data.csv")
    assert load_config(config, [COMPILE]).train.compile is True
    assert load_config(config).train.compile is False
    with pytest.raises(ValueError, match=r"train\.compile") as error:
        load_config(config, ["train.compile=3"])
    assert "\n" not in str(error.value)


@pytest.mark.parametrize("architecture", sorted(NOT_COMPILED))
def test_an_architecture_that_does_not_compile_is_refused_in_one_line(
    architecture: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """At config load, before any data is read (the dataset named does not exist)."""
    config = write_config(
        tmp_path / "c.toml",
        data={"dataset": tmp_path / "absent.csv"},
        model={"architecture": architecture},
    )
    error = one_line_error(capsys, ["train", str(config), "--set", COMPILE])
    assert f"architecture {architecture!r} does not compile: {NOT_COMPILED[architecture]}" in error
    assert "train.compile" in error
    with pytest.raises(ValueError, match="--compile: architecture"):
        compiling.compile_model(torch.nn.Linear(1, 1), architecture, "--compile")


def test_compile_for_inference_refuses_an_encoder_decoder() -> None:
    """Decoding runs the decoder step by step through its cache: eager, in one line."""
    from selfattn.models import StackConfig
    from selfattn.models.seq2seq import Seq2SeqTransformer, decoder_like

    stack = StackConfig(8, 2, 16, num_layers=1, positional="sinusoidal", max_len=16)
    model = Seq2SeqTransformer(stack, decoder_like(stack), target_vocab_size=9, source_vocab_size=9)
    with pytest.raises(ValueError, match="--compile: a seq2seq model") as error:
        compiling.compile_for_inference(model, "transformer")
    assert "\n" not in str(error.value)


def test_resuming_compiled_or_eager_is_not_a_changed_setting(tmp_path: Path) -> None:
    """The same model and checkpoints run either way: no warning names train.compile."""
    config = load_config(write_tiny_config(tmp_path, write_reviews(tmp_path / "r.csv", 8)))
    compiled = replace(config, train=replace(config.train, compile=True))
    spec = TaskSpec(task="sequence", vocab_size=10, num_labels=2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # any warning fails
        check_compatible(tmp_path, compiled, spec, config, spec)
    longer = replace(compiled, train=replace(compiled.train, epochs=config.train.epochs + 1))
    with pytest.warns(UserWarning, match=r"changed settings train\.epochs: "):
        check_compatible(tmp_path, longer, spec, config, spec)


def test_compiled_linear_layers_stay_one_onednn_operator_each(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Compiling keeps a model's oneDNN linear layers (``model.linear_layers``): the
    forward graph and the backward one (one each, no graph break) call the
    ``selfattn::onednn_linear`` operator once per layer, the kernel Inductor calls whole
    (the forward product, and in the backward the input gradient's)."""
    from functorch.compile import make_boxed_func
    from torch._dynamo.backends.common import aot_autograd

    from selfattn.attention.packed_linear import OneDNNLinear, onednn_usable
    from selfattn.datatypes import Batch
    from selfattn.models.registry import model_options
    from selfattn.models.task_model import build_model_from_spec

    if not onednn_usable(torch.zeros(1), torch.zeros(1)):
        pytest.skip("this PyTorch has no oneDNN")
    graphs: list[torch.fx.GraphModule] = []

    def record(graph: torch.fx.GraphModule, inputs: object) -> object:
        graphs.append(graph)
        return make_boxed_func(graph.forward)

    monkeypatch.setattr(compiling, "BACKEND", aot_autograd(fw_compiler=record, bw_compiler=record))
    spec = TaskSpec("token", vocab_size=30, char_vocab_size=None, num_labels=30, max_len=8)
    options = model_options(embed_dim=16, num_heads=2, num_layers=1, ffn_dim=32)
    model = build_model_from_spec(options, spec)
    layers = sum(isinstance(module, OneDNNLinear) for module in model.modules())
    compiling.compile_model(model, "transformer")
    try:
        ids = torch.randint(1, 30, (2, 8))
        mask = torch.zeros(2, 8, dtype=torch.bool)
        model(Batch(ids, None, None, mask, ids)).sum().backward()
    finally:
        torch._dynamo.reset()  # the other tests' compile counts start from none
    assert layers >= 6 and sum(isinstance(m, OneDNNLinear) for m in model.modules()) == layers
    operator = torch.ops.selfattn.onednn_linear.default
    calls = [sum(node.target is operator for node in graph.graph.nodes) for graph in graphs]
    assert calls == [layers, layers], calls


def test_inductor_draws_dropout_by_torchs_generator(monkeypatch: pytest.MonkeyPatch) -> None:
    """Inductor compiles with ``fallback_random`` (dropout's masks by PyTorch's generator,
    not Inductor's slower per-element one); another backend gets no Inductor options."""
    asked: list[dict[str, object]] = []
    monkeypatch.setattr(torch.nn.Module, "compile", lambda self, **kwargs: asked.append(kwargs))
    compiling.compile_model(torch.nn.Linear(2, 2), "transformer")
    monkeypatch.setattr(compiling, "BACKEND", "aot_eager")
    compiling.compile_model(torch.nn.Linear(2, 2), "transformer")
    inductor, other = asked
    assert inductor["backend"] == "inductor" and inductor["options"] == {"fallback_random": True}
    assert other["backend"] == "aot_eager" and other["options"] is None
