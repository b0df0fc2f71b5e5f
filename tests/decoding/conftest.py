"""Tiny random encoder–decoders and encoded batches for the decoding tests."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

from selfattn.models import StackConfig
from selfattn.models.seq2seq import (
    NUM_SPECIALS,
    EncodedSource,
    OutputKind,
    Seq2SeqTransformer,
    decoder_like,
)

VOCAB = 12  # 4 specials + 8 symbols, source and target
MAX_LEN = 16
OUTPUTS: tuple[OutputKind, ...] = ("vocab", "pointer", "copy")
POSITIONALS = ("sinusoidal", "rotary", "relative", "learned")

ModelFactory = Callable[..., Seq2SeqTransformer]
BatchFactory = Callable[..., tuple[EncodedSource, int]]


@pytest.fixture(autouse=True)
def _one_thread(one_thread: None) -> None:
    """Decoding tiny models is many tiny kernels: on a shared 2-core machine a second
    OpenMP thread only waits for the busy core (5-10× slower), so run on one."""


def tiny_model(
    output: OutputKind = "vocab",
    positional: str | None = "sinusoidal",
    max_len: int = MAX_LEN,
    **options: Any,
) -> Seq2SeqTransformer:
    """The brief's tiny model (E=32, H=4, 2+2 layers, FFN 64), random, in eval mode."""
    stack = StackConfig(
        32, 4, 64, num_layers=2, positional=positional, max_len=max_len, norm_first=True
    )
    settings: dict[str, Any] = {
        "target_vocab_size": NUM_SPECIALS if output == "pointer" else VOCAB,
        "source_vocab_size": VOCAB,
        "output": output,
        "length_predictor": True,
    }
    settings.update(options)
    return Seq2SeqTransformer(stack, decoder_like(stack), **settings).eval()


def encoded_batch(
    model: Seq2SeqTransformer, batch: int = 3, length: int = 6
) -> tuple[EncodedSource, int]:
    """Random sources of ``length`` ≤ 8 (row 0 padded to half) and ``num_extended``.

    In copy mode two source words of the last row are out of the target vocabulary
    (extended ids V, V + 1), so the other rows must not emit those ids.
    """
    # Distinct tokens within a row: identical source tokens get identical encoder states
    # under a relative encoding (equal values whatever the weights), so pointer scores tie.
    symbols = VOCAB - NUM_SPECIALS
    source = torch.stack([torch.randperm(symbols)[:length] for _ in range(batch)]) + NUM_SPECIALS
    padding = torch.zeros(batch, length, dtype=torch.bool)
    padding[0, length // 2 :] = True
    source = source.masked_fill(padding, 0)
    copy_ids, num_extended = None, 0
    if model.output == "copy":
        copy_ids = source.clone()
        copy_ids[-1, :2] = torch.tensor([VOCAB, VOCAB + 1])
        num_extended = 2
    with torch.no_grad():
        return model.encode(source, padding, copy_ids=copy_ids), num_extended


@pytest.fixture
def make_model() -> ModelFactory:
    return tiny_model


@pytest.fixture
def make_batch() -> BatchFactory:
    return encoded_batch
