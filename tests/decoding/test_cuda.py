"""Decoding on a GPU (marked ``gpu``; CI has none, ``pytest -m gpu`` on a machine with one).

On an accelerator the loops look for ended rows only every few steps (no host sync per
step), a path the CPU never takes unless a test forces it: here it runs for real, and
must decode what the CPU decodes from the same weights.
"""

from __future__ import annotations

import copy

import pytest
import torch

from selfattn.decoding import autoregressive, beam_search, greedy
from selfattn.models.seq2seq import NUM_SPECIALS, EncodedSource, Seq2SeqTransformer

from .conftest import OUTPUTS, VOCAB, tiny_model
from .test_rnn import VARIANTS as RNN_VARIANTS
from .test_rnn import rnn
from .test_static_cache import _ending_early

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]


def encode_on(model: Seq2SeqTransformer, device: str, batch: int = 4) -> tuple[EncodedSource, int]:
    """The same random sources (row 0 half padding) encoded by ``model`` on ``device``."""
    generator = torch.Generator().manual_seed(0)
    symbols = VOCAB - NUM_SPECIALS
    source = torch.stack([torch.randperm(symbols, generator=generator)[:6] for _ in range(batch)])
    source = source + NUM_SPECIALS
    padding = torch.zeros(batch, 6, dtype=torch.bool)
    padding[0, 3:] = True
    source = source.masked_fill(padding, 0)
    copy_ids, num_extended = None, 0
    if model.output == "copy":
        copy_ids = source.clone()
        copy_ids[-1, :2] = torch.tensor([VOCAB, VOCAB + 1])
        copy_ids = copy_ids.to(device)
        num_extended = 2
    with torch.no_grad():
        encoded = model.encode(source.to(device), padding.to(device), copy_ids=copy_ids)
    return encoded, num_extended


def pair(output: str, positional: str = "relative") -> tuple[Seq2SeqTransformer, ...]:
    """One random model in float64 on the CPU and its copy on CUDA."""
    torch.manual_seed(1)  # weights under which the rows of every output kind end apart
    cpu = tiny_model(output, positional).double()
    return cpu, copy.deepcopy(cpu).cuda()


@pytest.mark.parametrize("output", OUTPUTS)
def test_greedy_on_cuda_decodes_what_the_cpu_decodes(output: str) -> None:
    cpu, gpu = pair(output)
    runs = []
    for model, device in ((cpu, "cpu"), (gpu, "cuda")):
        encoded, num_extended = encode_on(model, device)
        runs.append(
            autoregressive(model, encoded, _ending_early(), max_len=12, num_extended=num_extended)
        )
    on_cpu, on_gpu = runs
    assert len(set(on_cpu.lengths)) > 1, "rows should end at different steps"
    assert on_gpu.tokens == on_cpu.tokens
    assert torch.equal(on_gpu.finished.cpu(), on_cpu.finished)
    torch.testing.assert_close(
        on_gpu.step_log_probs.cpu(), on_cpu.step_log_probs, atol=1e-9, rtol=0
    )


@pytest.mark.parametrize("output", ["vocab", "pointer"])
def test_beam_search_on_cuda_finds_what_the_cpu_finds(output: str) -> None:
    cpu, gpu = pair(output, "rotary")
    runs = []
    for model, device in ((cpu, "cpu"), (gpu, "cuda")):
        encoded, num_extended = encode_on(model, device)
        runs.append(
            beam_search(
                model,
                encoded,
                beam_size=3,
                max_len=12,
                length_penalty=1.0,
                num_extended=num_extended,
                nbest=True,
            )
        )
    on_cpu, on_gpu = runs
    assert on_gpu.tokens == on_cpu.tokens
    assert on_cpu.nbest is not None and on_gpu.nbest is not None
    assert [[h.tokens for h in n] for n in on_gpu.nbest] == [
        [h.tokens for h in n] for n in on_cpu.nbest
    ]
    torch.testing.assert_close(on_gpu.log_prob.cpu(), on_cpu.log_prob, atol=1e-9, rtol=0)


def test_greedy_in_bf16_on_cuda_runs_and_mostly_agrees_with_float32() -> None:
    if not torch.cuda.is_bf16_supported():
        pytest.skip("this GPU has no bf16")
    torch.manual_seed(0)
    model = tiny_model("vocab", "sinusoidal").cuda()
    results = []
    for dtype in (torch.float32, torch.bfloat16):
        encoded, _ = encode_on(model.to(dtype), "cuda", batch=8)
        results.append(greedy(model, encoded, max_len=12, min_len=12))
    full, half = results
    assert torch.isfinite(half.step_log_probs.float()).all()
    assert [len(t) for t in half.tokens] == [len(t) for t in full.tokens]
    first = [a[0] == b[0] for a, b in zip(full.tokens, half.tokens, strict=True)]
    assert sum(first) >= 6  # bf16 rounding may flip a near tie, not most first choices


@pytest.mark.parametrize("options", RNN_VARIANTS)
def test_the_rnn_encoder_decoder_decodes_on_cuda_what_it_decodes_on_the_cpu(options) -> None:
    """The recurrent state is the RNN's cache: on CUDA (cuDNN's packed GRU / LSTM) greedy
    and beam search give the CPU's tokens and scores."""
    cpu = rnn(**options)
    gpu = copy.deepcopy(cpu).cuda()
    torch.manual_seed(1)
    source = torch.randint(NUM_SPECIALS, VOCAB, (4, 6))
    padding = torch.zeros(4, 6, dtype=torch.bool)
    padding[0, 3:] = True
    source = source.masked_fill(padding, 0)
    runs = []
    with torch.no_grad():
        for model, device in ((cpu, "cpu"), (gpu, "cuda")):
            encoded = model.encode(source.to(device), padding.to(device))
            runs.append(
                (
                    greedy(model, encoded, max_len=10),
                    beam_search(model, encoded, beam_size=3, max_len=10),
                )
            )
    for on_cpu, on_gpu in zip(*runs, strict=True):
        assert on_gpu.tokens == on_cpu.tokens
        torch.testing.assert_close(on_gpu.log_prob.cpu(), on_cpu.log_prob, atol=1e-9, rtol=0)
