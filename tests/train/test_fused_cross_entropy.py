"""``train.fused_cross_entropy``: the row-chunked projection + cross-entropy gives the
plain path's loss and gradients (float64: hidden states, weight, bias; ignored rows,
label smoothing, tied weights), a seq2seq objective gives the same loss and gradients
with it on and off, a tiny run logs the same losses, and misuse is refused in one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from selfattn.data.batching.seq2seq_collate import Seq2SeqBatch
from selfattn.models.config import StackConfig
from selfattn.models.rnn_seq2seq import RNNSeq2Seq
from selfattn.models.seq2seq import Seq2SeqTransformer, decoder_like
from selfattn.models.seq2seq_options import Seq2SeqConfig
from selfattn.specials import BOS_ID, EOS_ID, IGNORE_INDEX, NUM_SPECIALS
from selfattn.tasks.seq2seq.objective import Seq2SeqObjective
from selfattn.train import fused_ce
from selfattn.train.fused_ce import AUTO_MIN_VOCAB, fuses, linear_cross_entropy

from ..helpers_cli import QUICK_TRAIN, TINY_MODEL, one_line_error, write_config
from ..helpers_data import write_pairs

N, E, V = 23, 8, 37


def _plain(
    hidden: Tensor, weight: Tensor, bias: Tensor | None, target: Tensor, eps: float
) -> Tensor:
    logits = F.linear(hidden, weight, bias)
    return F.cross_entropy(logits.reshape(-1, V), target.reshape(-1), label_smoothing=eps)


def _grads(loss: Tensor, tensors: list[Tensor]) -> tuple[Tensor, ...]:
    return torch.autograd.grad(loss * 1.7, tensors)  # a scale: the backward reads it


@pytest.mark.parametrize("eps", [0.0, 0.1])
@pytest.mark.parametrize("chunk_rows", [1, 5, 100])
def test_loss_and_gradients_are_the_plain_ones(eps: float, chunk_rows: int) -> None:
    torch.manual_seed(0)
    hidden = torch.randn(2, 12, E, dtype=torch.float64, requires_grad=True)[:, :-1]
    weight = torch.randn(V, E, dtype=torch.float64, requires_grad=True)
    bias = torch.randn(V, dtype=torch.float64, requires_grad=True)
    target = torch.randint(0, V, (2, 11))
    target[0, 6:] = IGNORE_INDEX  # padding: neither scored nor counted
    tensors = [hidden, weight, bias]
    fused = linear_cross_entropy(
        hidden, weight, bias, target, label_smoothing=eps, chunk_rows=chunk_rows
    )
    plain = _plain(hidden, weight, bias, target, eps)
    torch.testing.assert_close(fused, plain, rtol=1e-12, atol=1e-12)
    for ours, theirs in zip(_grads(fused, tensors), _grads(plain, tensors), strict=True):
        torch.testing.assert_close(ours, theirs, rtol=1e-12, atol=1e-12)


def test_a_tied_weight_gets_both_gradients() -> None:
    """The projection reads the embedding table: its gradient sums the embedding's
    and the loss's, as on the plain path."""
    torch.manual_seed(1)
    table = nn.Embedding(V, E).double()
    ids = torch.randint(0, V, (N,))
    target = torch.randint(0, V, (N,))
    target[::4] = IGNORE_INDEX
    grads = []
    for loss_of in (
        lambda h: linear_cross_entropy(h, table.weight, None, target, label_smoothing=0.2),
        lambda h: _plain(h, table.weight, None, target, 0.2),
    ):
        table.zero_grad()
        loss_of(torch.tanh(table(ids))).backward()
        assert table.weight.grad is not None
        grads.append(table.weight.grad.clone())
    torch.testing.assert_close(grads[0], grads[1], rtol=1e-12, atol=1e-12)


def test_no_real_row_gives_zero_and_no_grad_forms_no_gradient() -> None:
    hidden = torch.randn(4, E, dtype=torch.float64, requires_grad=True)
    weight = torch.randn(V, E, dtype=torch.float64, requires_grad=True)
    target = torch.full((4,), IGNORE_INDEX)
    loss = linear_cross_entropy(hidden, weight, None, target)
    assert float(loss.detach()) == 0.0
    (grad,) = torch.autograd.grad(loss, [hidden])
    assert not grad.any()
    target[1] = 3
    with torch.no_grad():
        evaluated = linear_cross_entropy(hidden, weight, None, target)
    assert not evaluated.requires_grad
    torch.testing.assert_close(evaluated, _plain(hidden, weight, None, target, 0.0).detach())


def test_bad_shapes_are_refused() -> None:
    hidden, weight = torch.randn(4, E), torch.randn(V, E)
    with pytest.raises(ValueError, match="disagree"):
        linear_cross_entropy(hidden, weight, None, torch.zeros(5, dtype=torch.long))
    with pytest.raises(ValueError, match=r"weight must be \(V, E\)"):
        linear_cross_entropy(hidden, weight.t(), None, torch.zeros(4, dtype=torch.long))
    with pytest.raises(ValueError, match="chunk_rows"):
        linear_cross_entropy(hidden, weight, None, torch.zeros(4, dtype=torch.long), chunk_rows=0)


def test_auto_fuses_large_vocabularies_of_the_vocab_output_only() -> None:
    assert fuses("auto", "vocab", AUTO_MIN_VOCAB)
    assert not fuses("auto", "vocab", AUTO_MIN_VOCAB - 1)
    assert fuses("on", "vocab", 10) and not fuses("off", "vocab", 10**6)
    assert not fuses("on", "copy", 10**6) and not fuses("on", "pointer", 10**6)
    assert fused_ce.default_chunk_rows(32_000) * 32_000 <= fused_ce.CHUNK_ELEMENTS
    assert fused_ce.default_chunk_rows(10**9) == 16


# ---------------------------------------------------------------------- the objective


def _batch(rows: int = 4, source_len: int = 6, target_len: int = 5) -> Seq2SeqBatch:
    torch.manual_seed(2)
    source = torch.randint(NUM_SPECIALS, 20, (rows, source_len))
    source_padding = torch.zeros(rows, source_len, dtype=torch.bool)
    source_padding[0, 3:] = True
    target = torch.randint(NUM_SPECIALS, 20, (rows, target_len + 1))
    target[:, 0] = BOS_ID
    target_padding = torch.zeros(rows, target_len + 1, dtype=torch.bool)
    target_padding[1, 3:] = True
    target[1, 2] = EOS_ID
    target_out = target[:, 1:].masked_fill(target_padding[:, 1:], IGNORE_INDEX)
    return Seq2SeqBatch(
        source.masked_fill(source_padding, 0),
        source_padding,
        target[:, :-1],
        target_out,
        target_padding[:, :-1],
    )


def _transformer(tie: bool) -> nn.Module:
    stack = StackConfig(16, 2, 32, num_layers=1, dropout=0.0, max_len=16)
    return Seq2SeqTransformer(
        stack,
        decoder_like(stack),
        source_vocab_size=20,
        target_vocab_size=20,
        tie_output=tie,
        length_predictor=True,
    )


def _rnn(tie: bool) -> nn.Module:
    sizes = {"embed_dim": 16, "hidden_dim": 16, "max_len": 16}
    return RNNSeq2Seq(target_vocab_size=20, source_vocab_size=20, tie_output=tie, **sizes)


@pytest.mark.parametrize(
    ("build", "options"),
    [
        (_transformer, {"nat": True, "coverage": 0.5}),
        (_transformer, {"guided_attention": 1.0}),
        (_rnn, {"coverage": 0.5}),
    ],
)
@pytest.mark.parametrize("tie", [True, False])
def test_the_objective_has_the_same_loss_and_gradients_on_and_off(
    build: type, options: dict[str, object], tie: bool
) -> None:
    torch.manual_seed(3)
    model = build(tie).double().train()
    batch = _batch()
    settings = Seq2SeqConfig(**options)  # type: ignore[arg-type]
    results = []
    for setting in ("on", "off"):
        objective = Seq2SeqObjective(settings, label_smoothing=0.1, fused_cross_entropy=setting)
        assert objective.fuses(model) == (setting == "on")
        model.zero_grad()
        loss = objective.loss(model, batch, step=0)
        loss.backward()
        grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
        results.append((loss.detach(), grads))
    (fused, fused_grads), (plain, plain_grads) = results
    torch.testing.assert_close(fused, plain, rtol=1e-10, atol=1e-12)
    assert fused_grads.keys() == plain_grads.keys()
    for name, grad in fused_grads.items():
        torch.testing.assert_close(grad, plain_grads[name], rtol=1e-9, atol=1e-12, msg=name)


# ---------------------------------------------------------------------- runs and config


def _config(tmp_path: Path, name: str, **seq2seq: object) -> Path:
    data = write_pairs(tmp_path / "pairs.tsv", 48, symbols="abcdefgh")
    return write_config(
        tmp_path / f"{name}.toml",
        run_dir=tmp_path / name,
        data={"dataset": data, "task": "seq2seq", "batch_size": 16, "max_len": 8},
        model=TINY_MODEL,
        seq2seq=seq2seq or None,
        train={**QUICK_TRAIN, "epochs": 2, "label_smoothing": 0.1},
    )


def _losses(run_dir: Path) -> list[tuple[float, float]]:
    lines = (run_dir / "metrics.jsonl").read_text(encoding="utf-8").splitlines()
    return [(row["train_loss"], row["dev_loss"]) for row in map(json.loads, lines)]


def test_a_tiny_run_logs_the_same_losses_on_and_off(tmp_path: Path) -> None:
    from selfattn.cli.main import main

    for setting in ("on", "off"):
        config = _config(tmp_path, setting)
        flags = ["--set", f"train.fused_cross_entropy={setting}"]
        assert main(["train", str(config), "--no-progress", *flags]) == 0
    on, off = _losses(tmp_path / "on"), _losses(tmp_path / "off")
    assert len(on) == 2
    for (train_on, dev_on), (train_off, dev_off) in zip(on, off, strict=True):
        assert train_on == pytest.approx(train_off, rel=1e-4)
        assert dev_on == pytest.approx(dev_off, rel=1e-4)


@pytest.mark.parametrize(
    ("setting", "seq2seq", "message"),
    [
        ("maybe", {}, "train.fused_cross_entropy: expected one of 'auto', 'on', 'off'"),
        ("on", {"output": "copy"}, 'seq2seq.output = "copy" is not a cross-entropy of its logits'),
    ],
)
def test_misuse_is_refused_in_one_line(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    setting: str,
    seq2seq: dict[str, object],
    message: str,
) -> None:
    config = _config(tmp_path, "refused", **seq2seq)
    flags = ["--set", f"train.fused_cross_entropy={setting}"]
    assert message in one_line_error(capsys, ["train", str(config), *flags])


def test_on_is_refused_for_a_task_without_a_vocabulary_output(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from ..tiny_runs import write_reviews, write_tiny_config

    config = write_tiny_config(tmp_path, write_reviews(tmp_path / "reviews.csv"))
    flags = ["--set", "train.fused_cross_entropy=on"]
    err = one_line_error(capsys, ["train", str(config), *flags])
    assert "this dataset is a sequence task" in err
