"""Early exit (model.exit_heads): threshold 0 stops every example after block 1, a threshold
above 1 runs every block and is the normal model; taking exited rows out of the batch gives
each example the answer it gets alone; the training loss is the weighted sum of every exit's;
the sweep's arithmetic equals running the adaptive stack."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
import torch
from torch import Tensor, nn

from selfattn.datatypes import Batch
from selfattn.models.composed import TaskModel
from selfattn.models.early_exit import (
    EarlyExitModel,
    confidence,
    exit_loss_weights,
    weighted_exit_loss,
)
from selfattn.models.option_groups import ModelOptions
from selfattn.models.registry import model_options
from selfattn.models.spec import TaskSpec
from selfattn.models.task_model import build_model_from_spec
from selfattn.tasks.early_exit import evaluate_early_exit, exit_sweep
from selfattn.tasks.metrics import compute_loss

from ..helpers_models import with_options

pytestmark = pytest.mark.usefixtures("one_thread")

VOCAB, LABELS, LAYERS = 20, 3, 4
LENGTHS = [7, 2, 5, 1, 6, 3]
BASE = model_options(
    embed_dim=16, num_heads=2, num_layers=LAYERS, ffn_dim=32, dropout=0.1, exit_heads=True
)
#: (task, config): both task types, both stacks, a post-LN stack (no final norm), [CLS].
CASES = [
    ("sequence", BASE),
    ("token", BASE),
    ("sequence", replace(BASE, norm_first=False, pooling="attention")),
    ("sequence", replace(BASE, pooling="cls", positional="learned")),
    ("sequence", with_options(BASE, architecture="conformer", window_k=1)),
    ("token", with_options(BASE, architecture="conformer", window_k=1, positional="rotary")),
]
IDS = ["sequence", "token", "post-ln", "cls", "conformer-sequence", "conformer-token"]


def _batch(task: str, lengths: list[int] = LENGTHS, seed: int = 0) -> Batch:
    generator = torch.Generator().manual_seed(seed)
    length = max(lengths)
    mask = torch.arange(length)[None, :] >= torch.tensor(lengths)[:, None]
    tokens = torch.randint(2, VOCAB, (len(lengths), length), generator=generator)
    if task == "token":
        labels = torch.randint(0, LABELS, (len(lengths), length), generator=generator)
        labels = labels.masked_fill(mask, -100)
    else:
        labels = torch.randint(0, LABELS, (len(lengths),), generator=generator)
    return Batch(tokens.masked_fill(mask, 0), None, None, mask, labels)


def _model(task: str, config: ModelOptions) -> EarlyExitModel:
    torch.manual_seed(0)
    model = build_model_from_spec(config, TaskSpec(task=task, num_labels=LABELS, vocab_size=VOCAB))
    assert isinstance(model, EarlyExitModel)
    # Sharpen the classifiers so a middle threshold splits the batch across blocks.
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, nn.Linear) and module.out_features == LABELS:
                module.weight.mul_(6.0)
    return model.eval()


def _alone(batch: Batch, example: int) -> Batch:
    """Example ``example`` of ``batch`` as a batch of one, without padding."""
    assert batch.token_ids is not None
    n = LENGTHS[example]
    labels = batch.labels[example : example + 1]
    return Batch(
        batch.token_ids[example : example + 1, :n],
        None,
        None,
        batch.key_padding_mask[example : example + 1, :n],
        labels if labels.dim() == 1 else labels[:, :n],
    )


def _real(logits: Tensor, batch: Batch) -> list[Tensor]:
    """Per example, its logits at its real positions (a token task) or its logits."""
    if logits.dim() == 2:
        return list(logits)
    lengths = (~batch.key_padding_mask).sum(dim=1)
    return [row[:n] for row, n in zip(logits, lengths, strict=True)]


@pytest.mark.parametrize(("task", "config"), CASES, ids=IDS)
def test_threshold_zero_uses_block_one_for_every_example(task: str, config: ModelOptions) -> None:
    model, batch = _model(task, config), _batch(task)
    result = model.early_exit(batch, 0.0)
    assert result.layers.tolist() == [1] * len(LENGTHS)
    first = model(batch, exits=True)[0]
    for got, want in zip(_real(result.logits, batch), _real(first, batch), strict=True):
        torch.testing.assert_close(got, want)


@pytest.mark.parametrize(("task", "config"), CASES, ids=IDS)
def test_a_threshold_above_one_is_the_normal_model(task: str, config: ModelOptions) -> None:
    """Every block runs, and the answer is the full-depth model's: the exit model's own
    forward and a model built without exit heads holding the same weights."""
    model, batch = _model(task, config), _batch(task)
    result = model.early_exit(batch, 1.5)
    assert result.layers.tolist() == [LAYERS] * len(LENGTHS)
    plain = build_model_from_spec(
        replace(config, exit_heads=False), TaskSpec(task=task, num_labels=LABELS, vocab_size=VOCAB)
    )
    assert type(plain) is TaskModel
    weights = model.state_dict()
    # The same weights under the same names, and the exit heads besides: nothing twice.
    extra = {name for name in weights if name not in plain.state_dict()}
    assert extra and all(name.startswith("exits.") for name in extra)
    plain.load_state_dict({name: weights[name] for name in plain.state_dict()})
    plain.eval()
    with torch.no_grad():
        normal = plain(batch)
    torch.testing.assert_close(model(batch), normal)
    for got, want in zip(_real(result.logits, batch), _real(normal, batch), strict=True):
        torch.testing.assert_close(got, want)


@pytest.mark.parametrize(("task", "config"), CASES, ids=IDS)
def test_exited_rows_leave_the_batch_and_the_answers_stay(task: str, config: ModelOptions) -> None:
    """At thresholds that split the batch, each example's logits are those of the block it
    left after (every block run on the whole batch), and of running it alone; each block
    runs only on the rows still in, cut to the longest of them."""
    model, batch = _model(task, config), _batch(task)
    every = model(batch, exits=True)
    seen: list[tuple[int, int]] = []
    hooks = [
        block.register_forward_pre_hook(lambda _, args: seen.append(tuple(args[0].shape[:2])))
        for block in model.stack.layers
    ]
    mixed = 0
    try:
        for threshold in (0.5, 0.7, 0.9, 0.99):
            seen.clear()
            result = model.early_exit(batch, threshold)
            layers = result.layers
            mixed += len(set(layers.tolist())) > 1
            prefix = int(model.cls_token is not None)
            for block, (rows, length) in enumerate(seen):
                still = layers > block
                assert rows == int(still.sum())
                assert length == max(n for n, s in zip(LENGTHS, still, strict=True) if s) + prefix
            for example, (got, used) in enumerate(
                zip(_real(result.logits, batch), layers, strict=True)
            ):
                want = _real(every[int(used) - 1], batch)[example]
                torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)
                single = model.early_exit(_alone(batch, example), threshold)
                assert single.layers.tolist() == [int(used)]
                torch.testing.assert_close(single.logits[0], got, rtol=1e-4, atol=1e-5)
    finally:
        for hook in hooks:
            hook.remove()
    assert mixed, "no threshold split the batch across blocks: the test proves nothing"


@pytest.mark.parametrize("scheme", ["uniform", "linear"])
@pytest.mark.parametrize("task", ["sequence", "token"])
def test_the_training_loss_is_the_weighted_sum_of_every_exit(task: str, scheme: str) -> None:
    from selfattn.config import Config, DataConfig
    from selfattn.tasks.sequence import SequenceTask
    from selfattn.tasks.token import TokenTask

    config = replace(BASE, exit_loss_weights=scheme)
    model, batch = _model(task, config), _batch(task)
    model.train()
    weights = exit_loss_weights(scheme, LAYERS)
    assert weights == pytest.approx([0.25] * 4 if scheme == "uniform" else [0.1, 0.2, 0.3, 0.4])
    assert model.loss_weights == weights
    run = Config(data=DataConfig(dataset="x"), model=config)
    labelling = (TokenTask if task == "token" else SequenceTask)(run)
    torch.manual_seed(3)
    loss = labelling.loss(model, batch, step=0)
    torch.manual_seed(3)  # the same dropout masks
    per_exit = [compute_loss(logits, batch.labels, 0.0) for logits in model(batch, exits=True)]
    torch.testing.assert_close(
        loss, sum(w * part for w, part in zip(weights, per_exit, strict=True))
    )
    assert loss.requires_grad
    loss.backward()
    for index, exit_head in enumerate(model.exits):  # every exit learns
        assert exit_head.head.proj.weight.grad is not None, index
    assert torch.equal(
        weighted_exit_loss([torch.tensor(2.0), torch.tensor(4.0)], [0.25, 0.75], lambda t: t),
        torch.tensor(3.5),
    )


def test_the_loss_weights_sum_to_one_and_unknown_schemes_are_refused() -> None:
    for layers in (1, 2, 6):
        for scheme in ("uniform", "linear"):
            assert math.isclose(sum(exit_loss_weights(scheme, layers)), 1.0)
    assert exit_loss_weights("linear", 3) == pytest.approx([1 / 6, 2 / 6, 3 / 6])
    with pytest.raises(ValueError, match="choose uniform or linear"):
        exit_loss_weights("cubic", 3)
    with pytest.raises(ValueError, match=r"needs model\.exit_heads = true"):
        model_options(exit_loss_weights="linear")


def test_confidence_is_max_probability_or_one_minus_normalised_entropy() -> None:
    uniform, sure = torch.zeros(1, 4), torch.tensor([[50.0, 0.0, 0.0, 0.0]])
    mask = torch.zeros(1, 1, dtype=torch.bool)
    assert confidence(uniform, mask, "max-prob").item() == pytest.approx(0.25)
    assert confidence(uniform, mask, "entropy").item() == pytest.approx(0.0, abs=1e-6)
    assert confidence(sure, mask, "max-prob").item() == pytest.approx(1.0)
    assert confidence(sure, mask, "entropy").item() == pytest.approx(1.0, abs=1e-6)
    # A token task's example is as sure as its least sure real position; padding ignored.
    tokens = torch.stack([sure[0], sure[0], uniform[0]])[None]  # (1, 3, 4)
    padded = torch.tensor([[False, False, True]])
    assert confidence(tokens, padded, "max-prob").item() == pytest.approx(1.0)
    assert confidence(tokens, torch.zeros_like(padded), "max-prob").item() == pytest.approx(0.25)
    with pytest.raises(ValueError, match="max-prob or entropy"):
        confidence(sure, mask, "margin")


@pytest.mark.parametrize("criterion", ["max-prob", "entropy"])
@pytest.mark.parametrize("task", ["sequence", "token"])
def test_the_sweep_is_what_running_each_threshold_gives(task: str, criterion: str) -> None:
    model = _model(task, BASE)
    batches = [_batch(task, seed=seed) for seed in range(3)]
    thresholds = [0.0, 0.3, 0.6, 0.8, 0.95, 2.0]
    sweep = exit_sweep(model, batches, thresholds, criterion)
    for point in sweep.points:
        assert point.threshold is not None
        ran = evaluate_early_exit(model, batches, point.threshold, criterion)
        assert point.accuracy == pytest.approx(ran["accuracy"])
        assert point.mean_layers == pytest.approx(ran["mean_layers"])
        assert point.count == ran["count"]
    assert sweep.points[0].mean_layers == 1.0 and sweep.points[-1].mean_layers == LAYERS
    assert [p.mean_layers for p in sweep.fixed] == [1.0, 2.0, 3.0, 4.0]
    assert sweep.points[-1].accuracy == pytest.approx(sweep.full_depth.accuracy)
    best = sweep.best()
    assert best is not None and best.accuracy >= sweep.full_depth.accuracy - 0.01 - 1e-9
    assert all(
        p.mean_layers >= best.mean_layers
        for p in sweep.points
        if p.accuracy >= sweep.full_depth.accuracy - 0.01
    )


def test_bad_thresholds_are_refused() -> None:
    model, batch = _model("sequence", BASE), _batch("sequence")
    for bad in (-0.1, float("nan")):
        with pytest.raises(ValueError, match="must be >= 0"):
            model.early_exit(batch, bad)
    with pytest.raises(ValueError, match="max-prob or entropy"):
        model.early_exit(batch, 0.5, "margin")


def test_each_exit_decays_with_its_block() -> None:
    model = _model("sequence", BASE)
    groups = model.layer_groups()
    assert len(groups) == LAYERS + 2
    flat = [id(p) for group in groups for p in group]
    assert sorted(flat) == sorted(id(p) for p in model.parameters())  # each once
    for index, exit_head in enumerate(model.exits):
        assert {id(p) for p in exit_head.parameters()} <= {id(p) for p in groups[index + 1]}


@pytest.mark.parametrize(
    ("task", "changes", "message"),
    [
        ("regression", {}, "early exit is for token and sequence tasks"),
        ("sequence", {"architecture": "bigru", "num_heads": 4}, "does not use it"),
        ("sequence", {"architecture": "graph"}, "does not use it"),
        ("sequence", {"share_weights": True, "halting": "act"}, "chooses each position's depth"),
    ],
)
def test_exit_heads_elsewhere_are_refused_in_one_line(
    task: str, changes: dict[str, object], message: str
) -> None:
    spec = TaskSpec(task=task, num_labels=1 if task == "regression" else LABELS, vocab_size=VOCAB)
    with pytest.raises(ValueError, match=message) as error:
        # A field another architecture does not read is refused with its options.
        build_model_from_spec(with_options(BASE, **changes), spec)
    assert "\n" not in str(error.value)
