"""The hooks a label task calls on its model instead of asking its class
(:mod:`selfattn.models.label_hooks`): each model says what its attention shows and adds
its own part of the loss."""

from __future__ import annotations

import pytest
import torch

from selfattn.datatypes import Batch
from selfattn.models.act import ponder_penalty
from selfattn.models.early_exit import weighted_exit_loss
from selfattn.models.label_hooks import LabelModelHooks
from selfattn.models.registry import model_options
from selfattn.models.task_model import TaskSpec, build_model_from_spec

SPEC = TaskSpec(task="sequence", num_labels=3, vocab_size=12)
SMALL = {"embed_dim": 16, "ffn_dim": 16, "num_layers": 2}


def _batch() -> Batch:
    ids = torch.tensor([[4, 5, 2, 6, 3], [7, 8, 2, 9, 3]])
    mask = torch.zeros(2, 5, dtype=torch.bool)
    return Batch(
        token_ids=ids,
        char_ids=None,
        features=None,
        labels=torch.tensor([0, 2]),
        key_padding_mask=mask,
    )


@pytest.mark.parametrize(
    ("options", "view", "exits"),
    [
        ({"architecture": "transformer"}, "blocks", False),
        ({"architecture": "bigru"}, "blocks", False),
        ({"architecture": "transformer", "exit_heads": True}, "blocks", True),
        ({"architecture": "memn2n", "embed_dim": 16, "num_layers": 2}, "hops", False),
    ],
)
def test_every_label_model_declares_its_view_and_exits(
    options: dict[str, object], view: str, exits: bool
) -> None:
    sizes = {} if options["architecture"] == "memn2n" else SMALL
    model = build_model_from_spec(model_options(**sizes, **options), SPEC)  # type: ignore[arg-type]
    assert isinstance(model, LabelModelHooks)
    assert (model.attention_view, model.has_exit_heads) == (view, exits)


def _loss_of(batch: Batch) -> object:
    return lambda logits: torch.nn.functional.cross_entropy(logits, batch.labels)


def test_a_plain_model_adds_its_ponder_cost_and_the_exit_model_weighs_its_exits() -> None:
    torch.manual_seed(0)
    batch = _batch()
    act = model_options(**SMALL, share_weights=True, halting="act", ponder_weight=0.5)
    plain = build_model_from_spec(act, SPEC).eval()  # no dropout: two passes agree
    loss = plain.task_loss(plain, batch, _loss_of(batch))  # type: ignore[operator]
    expected = _loss_of(batch)(plain(batch)) + ponder_penalty(plain)  # type: ignore[operator]
    assert float(ponder_penalty(plain).detach()) > 0  # type: ignore[union-attr]
    assert torch.allclose(loss, expected)
    exits = build_model_from_spec(model_options(**SMALL, exit_heads=True), SPEC).eval()
    joint = exits.task_loss(exits, batch, _loss_of(batch))  # type: ignore[operator]
    per_layer = exits(batch, exits=True)
    assert torch.allclose(
        joint,
        weighted_exit_loss(per_layer, exits.loss_weights, _loss_of(batch)),  # type: ignore[arg-type]
    )
