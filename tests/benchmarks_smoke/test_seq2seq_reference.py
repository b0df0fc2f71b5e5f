"""benchmarks/seq2seq_reference.py's torch.nn twin drops what ours drops."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest
from torch import nn

from selfattn.config import load_config
from selfattn.tasks import prepare

from ..helpers_scripts import ROOT, load_script


def load_reference() -> ModuleType:
    return load_script("benchmarks/seq2seq_reference.py")


@pytest.mark.parametrize(
    ("overrides", "hidden", "weights"),
    [
        ([], 0.0, 0.1),  # the defaults: BERT's placement, no FFN hidden dropout
        (["model.ffn_dropout=none"], 0.1, 0.1),  # the shipped translate configs' pin
        (["model.ffn_dropout=0.2", "model.attention_dropout=0.05"], 0.2, 0.05),
    ],
)
def test_twin_drops_what_ours_drops(
    overrides: list[str], hidden: float, weights: float, tmp_path: Path
) -> None:
    reference = load_reference()
    config = load_config(
        ROOT / "configs" / "convex_hull.toml",
        ["model.dropout=0.1", "data.train_fraction=0.05", f"run_dir={tmp_path}", *overrides],
    )
    prepared = prepare(config)
    ours = prepared.task.build()
    twin = reference.TorchStacks(config, prepared.spec).build()
    ffn = {m.dropout.p for m in ours.modules() if type(m).__name__ == "FeedForward"}
    assert ffn == {hidden}
    torch_layers = [
        m
        for m in twin.modules()
        if isinstance(m, nn.TransformerEncoderLayer | nn.TransformerDecoderLayer)
    ]
    assert torch_layers
    assert {layer.dropout.p for layer in torch_layers} == {hidden}
    attentions = [m for m in twin.modules() if isinstance(m, nn.MultiheadAttention)]
    assert {attention.dropout for attention in attentions} == {weights}
    assert {layer.dropout1.p for layer in torch_layers} == {0.1}  # residual: model.dropout
