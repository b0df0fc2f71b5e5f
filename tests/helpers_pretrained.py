"""Pretrained weights for the tests: the registered ones, or a skip saying why they cannot
be fetched here, and the layer-by-layer comparison with Hugging Face's models."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from selfattn.pretrained.weights import PRETRAINED, PretrainedError


def fetched_weights(name: str) -> Path:
    """The folder of the registered weights ``name``, or a skip where they cannot be
    fetched (no network). A fetch that succeeds but whose conversion fails is a bug and
    raises."""
    try:
        return PRETRAINED[name].fetch()
    except PretrainedError as err:
        if "cannot be fetched" not in str(err):
            raise
        pytest.skip(f"{name}: its weights cannot be fetched here ({err})")


def padded_ids(vocab_size: int) -> dict[str, torch.Tensor]:
    """Three rows of 9, 5 and 2 random ids in 1 … vocab_size − 1, padded with 0 to 9:
    ``input_ids`` and ``attention_mask``."""
    generator = torch.Generator().manual_seed(1)
    input_ids = torch.randint(1, vocab_size, (3, 9), generator=generator)
    attention_mask = torch.zeros(3, 9, dtype=torch.long)
    for row, length in enumerate([9, 5, 2]):
        attention_mask[row, :length] = 1
    return {"input_ids": input_ids * attention_mask, "attention_mask": attention_mask}


def assert_hidden_states_equal(
    ours: torch.nn.Module,
    reference: torch.nn.Module,
    inputs: dict[str, torch.Tensor],
    num_layers: int,
) -> None:
    """``ours(**inputs)`` gives the embeddings and every layer's output as Hugging Face's
    ``reference`` does (``output_hidden_states``), within 1e-5 at the real positions."""
    with torch.no_grad():
        expected = reference(**inputs, output_hidden_states=True).hidden_states
        got = ours(**inputs).hidden_states
    assert len(got) == len(expected) == num_layers + 1
    real = inputs["attention_mask"].bool()
    for layer, (mine, theirs) in enumerate(zip(got, expected, strict=True)):
        difference = (mine[real] - theirs[real]).abs().max().item()
        assert difference <= 1e-5, f"hidden state {layer}: max |difference| {difference:.2e}"
