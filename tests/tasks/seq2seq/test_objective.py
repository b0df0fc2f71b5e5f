"""The seq2seq objective as the training loop uses it: every option composes into one
finite, differentiable loss, and options that are off change nothing."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from selfattn.data import Example
from selfattn.data.batching.seq2seq_collate import (
    Seq2SeqBatch,
    Seq2SeqCollator,
    target_vocabulary,
)
from selfattn.data.vocab import Vocabulary
from selfattn.models.registry import model_options
from selfattn.models.seq2seq_builder import build_seq2seq_model
from selfattn.models.seq2seq_options import Seq2SeqConfig
from selfattn.models.task_model import TaskSpec
from selfattn.specials import IGNORE_INDEX, PAD_ID
from selfattn.tasks.seq2seq import objective as objective_module
from selfattn.tasks.seq2seq.objective import (
    Seq2SeqObjective,
    encode_batch,
    finite_log_probs,
    nat_inputs,
)

WORDS = ["a", "b", "c", "d", "e"]


def _batch(output: str = "vocab") -> tuple[Seq2SeqCollator, list[Example]]:
    examples = [
        Example(tuple(WORDS[: 2 + i % 3]), None, tuple(reversed(WORDS[: 2 + i % 3])), f"x:{i}")
        for i in range(6)
    ]
    source = Vocabulary(WORDS)
    target = target_vocabulary([e.label for e in examples])
    return Seq2SeqCollator(source, target, target=output), examples  # type: ignore[arg-type]


def _model(settings: Seq2SeqConfig, collator: Seq2SeqCollator) -> torch.nn.Module:
    assert collator.source_vocab is not None and collator.target_vocab is not None
    spec = TaskSpec(
        task="seq2seq",
        num_labels=len(collator.target_vocab),
        vocab_size=len(collator.source_vocab),
        max_len=16,
    )
    model_config = model_options(embed_dim=16, num_heads=2, num_layers=1, ffn_dim=32, dropout=0.0)
    return build_seq2seq_model(model_config, settings, spec)


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"nat": True},
        {"guided_attention": 1.0},
        {"coverage": 1.0},
        {"coverage": 1.0, "output": "copy"},
        {"scheduled_sampling": "linear", "sampling_steps": 10},
        {"cross_layers": "matching", "share_embeddings": False},
    ],
)
def test_every_option_gives_a_finite_differentiable_loss(options: dict[str, object]) -> None:
    settings = Seq2SeqConfig(**options)  # type: ignore[arg-type]
    collator, examples = _batch(settings.output)
    model = _model(settings, collator)
    batch = collator(examples)
    loss = Seq2SeqObjective(settings, label_smoothing=0.1).loss(model, batch, step=5)
    loss.backward()
    assert torch.isfinite(loss)
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    assert grads and all(torch.isfinite(g).all() for g in grads)


def test_switched_off_terms_change_nothing() -> None:
    collator, examples = _batch()
    plain = Seq2SeqConfig()
    model = _model(plain, collator)
    batch = collator(examples)
    base = Seq2SeqObjective(plain).loss(model, batch, step=0)
    for settings in (
        Seq2SeqConfig(guided_attention=0.0, coverage=0.0),
        Seq2SeqConfig(scheduled_sampling="linear", sampling_steps=100),  # ratio 0 at step 0
    ):
        torch.testing.assert_close(Seq2SeqObjective(settings).loss(model, batch, 0), base)
    with_guide = Seq2SeqObjective(Seq2SeqConfig(guided_attention=1.0)).loss(model, batch, 0)
    assert with_guide > base


def test_nat_inputs_are_bos_up_to_each_length() -> None:
    ids, padding = nat_inputs(torch.tensor([2, 4]))
    assert ids.tolist() == [[2, 2, 0, 0], [2, 2, 2, 2]]
    assert padding.tolist() == [[False, False, True, True], [False] * 4]


def test_nat_inputs_take_a_wider_width() -> None:
    ids, padding = nat_inputs(torch.tensor([2, 3]), width=5)
    assert ids.tolist() == [[2, 2, 0, 0, 0], [2, 2, 2, 0, 0]]
    assert padding.tolist() == [[False, False, True, True, True], [False] * 3 + [True] * 2]


def test_the_nat_pass_takes_its_width_from_the_batch_and_padding_changes_nothing() -> None:
    """The NAT pass is as wide as the batch's targets (no read of the lengths back from
    the device); a batch padded one column wider gives the same loss."""
    settings = Seq2SeqConfig(nat=True)
    collator, examples = _batch()
    model = _model(settings, collator)
    model.eval()
    batch = collator(examples)
    objective = Seq2SeqObjective(settings)
    encoded = encode_batch(model, batch)
    loss = objective.nat_loss(model, encoded, batch)
    longest = int((~batch.target_padding).sum(1).max())
    assert longest == batch.target_padding.shape[1]  # the collator pads to the longest
    wider = Seq2SeqBatch(
        batch.source,
        batch.source_padding,
        F.pad(batch.target_in, (0, 1), value=PAD_ID),
        F.pad(batch.target_out, (0, 1), value=IGNORE_INDEX),
        F.pad(batch.target_padding, (0, 1), value=True),
    )
    torch.testing.assert_close(objective.nat_loss(model, encoded, wider), loss)


@pytest.mark.parametrize("output", ["vocab", "copy"])
def test_finite_outputs_take_the_smoothing_shortcut(
    output: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A vocabulary output (a log-softmax) and the copy output (floored above 0) have
    every log-probability finite: their smoothed loss takes the shortcut, in the
    autoregressive and the NAT terms."""
    seen: list[bool] = []
    nll = objective_module.sequence_nll

    def recording(*args: object, **kwargs: object) -> torch.Tensor:
        seen.append(bool(kwargs["all_finite"]))
        return nll(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(objective_module, "sequence_nll", recording)
    settings = Seq2SeqConfig(output=output, nat=output == "vocab")  # type: ignore[arg-type]
    collator, examples = _batch(output)
    model = _model(settings, collator)
    loss = Seq2SeqObjective(settings, label_smoothing=0.1).loss(model, collator(examples), 0)
    assert torch.isfinite(loss)
    assert seen == [True] * (2 if output == "vocab" else 1)


def test_the_pointer_output_is_not_all_finite() -> None:
    collator, _ = _batch()
    pointer = _model(Seq2SeqConfig(output="pointer", tie_output=False), collator)
    assert not finite_log_probs(pointer)  # type: ignore[arg-type]
    assert finite_log_probs(_model(Seq2SeqConfig(), collator))  # type: ignore[arg-type]


def test_config_refuses_inconsistent_settings() -> None:
    with pytest.raises(ValueError, match=r"seq2seq\.nat = true"):
        Seq2SeqConfig(decoding="nat")
    with pytest.raises(ValueError, match="sampling_max"):
        Seq2SeqConfig(sampling_max=1.5)
    with pytest.raises(ValueError, match="architecture"):
        collator, _ = _batch()
        assert collator.source_vocab is not None
        spec = TaskSpec(task="seq2seq", num_labels=10, vocab_size=len(collator.source_vocab))
        build_seq2seq_model(model_options(architecture="bigru"), Seq2SeqConfig(), spec)
