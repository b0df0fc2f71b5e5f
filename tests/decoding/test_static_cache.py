"""The preallocated KV cache and the sync-free decoding loop change nothing but speed:
the static cache equals the growing one and the recomputed prefix, moves its rows with
beam search, refuses to overflow, and a loop that looks for ended rows only every few
steps decodes exactly what a loop looking every step decodes."""

from __future__ import annotations

import importlib
import itertools
from collections.abc import Callable

import pytest
import torch
from torch import Tensor

from selfattn.attention.cache import DecoderCache, KVCache
from selfattn.decoding import DecodeResult, IncrementalDecoder, autoregressive, beam_search
from selfattn.models import Decoder, StackConfig
from selfattn.models.seq2seq import EOS_ID, NUM_SPECIALS

OUTPUTS = ("vocab", "pointer", "copy")
# The module, not the function that selfattn.decoding exports under the same name.
greedy_module = importlib.import_module("selfattn.decoding.greedy")
beam_module = importlib.import_module("selfattn.decoding.beam")


@pytest.mark.parametrize("positional", ["sinusoidal", "rotary", "relative", "alibi"])
def test_static_cache_equals_growing_cache_and_recomputation(positional: str) -> None:
    config = StackConfig(16, 2, 32, num_layers=2, positional=positional, max_len=32)
    decoder = Decoder(config).double().eval()
    x, memory = torch.randn(2, 7, 16).double(), torch.randn(2, 5, 16).double()
    padding = torch.tensor([[False] * 5, [False] * 3 + [True] * 2])
    with torch.no_grad():
        full = decoder(x, memory, memory_key_padding_mask=padding).last_hidden_state
        runs = []
        for cache in (DecoderCache(capacity=7), DecoderCache()):
            prompt = decoder(x[:, :3], memory, memory_key_padding_mask=padding, cache=cache)
            steps = [prompt.last_hidden_state]
            for t in range(3, 7):
                out = decoder(x[:, t : t + 1], memory, memory_key_padding_mask=padding, cache=cache)
                steps.append(out.last_hidden_state)
            runs.append(torch.cat(steps, dim=1))
    static, growing = runs
    torch.testing.assert_close(static, full, rtol=0, atol=1e-12)
    torch.testing.assert_close(static, growing, rtol=0, atol=1e-12)


def test_static_cache_reorders_rows_as_beam_search_does() -> None:
    config = StackConfig(16, 2, 32, num_layers=2, positional="rotary", max_len=32)
    decoder = Decoder(config).double().eval()
    x, memory = torch.randn(3, 6, 16).double(), torch.randn(3, 4, 16).double()
    index = torch.tensor([2, 0, 0])  # drop row 1, repeat row 0
    with torch.no_grad():
        full = decoder(x[index], memory[index]).last_hidden_state
        cache = DecoderCache(capacity=6)
        decoder(x[:, :4], memory, cache=cache)
        cache.reorder(index)
        rest = decoder(x[index, 4:], memory[index], cache=cache).last_hidden_state
    torch.testing.assert_close(rest, full[:, 4:], rtol=0, atol=1e-12)


def test_reorder_moves_rows_in_place_as_a_selection_would() -> None:
    """On the CPU a reorder that keeps the row count rewrites the buffers in place (no
    new allocation per beam step) and holds exactly what selecting the rows gives, for
    swaps, repeats and chains of reorders; one that drops rows selects a new buffer."""
    generator = torch.Generator().manual_seed(0)
    cache = KVCache(capacity=8)
    keys, values = torch.randn(5, 2, 6, 3, generator=generator), torch.randn(5, 2, 6, 3)
    cache.append(keys[:, :, :4], values[:, :, :4])
    expected_keys, expected_values = keys[:, :, :4], values[:, :, :4]
    buffer = cache.key.untyped_storage().data_ptr()  # type: ignore[union-attr]
    for index in ([4, 0, 0, 3, 1], [0, 1, 2, 3, 4], [1, 0, 3, 2, 2], [2, 2, 2, 2, 2]):
        rows = torch.tensor(index)
        cache.reorder(rows)
        expected_keys, expected_values = expected_keys[rows], expected_values[rows]
        assert torch.equal(cache.key, expected_keys) and torch.equal(cache.value, expected_values)
        assert cache.key.untyped_storage().data_ptr() == buffer  # type: ignore[union-attr]
    cache.append(keys[:, :, 4:5], values[:, :, 4:5])  # later steps write after the moved rows
    assert torch.equal(cache.key[:, :, :4], expected_keys)  # type: ignore[index]
    cache.reorder(torch.tensor([3, 1]))
    assert torch.equal(cache.key[:, :, :4], expected_keys[[3, 1]])  # type: ignore[index]
    assert cache.key.untyped_storage().data_ptr() != buffer  # type: ignore[union-attr]


def test_caches_allocated_together_move_every_layers_rows_in_one_buffer() -> None:
    """:meth:`DecoderCache.allocate`: every layer's self-attention buffers are views of one
    buffer, which a beam reorder (same rows, memory kept) rewrites at once, holding
    exactly what selecting each layer's rows gives; a reorder that drops rows gives each
    layer its own buffers again, still right."""
    generator = torch.Generator().manual_seed(0)
    cache = DecoderCache(capacity=6)
    cache.allocate(3, torch.zeros(4, 2, 1, 5))
    shape = (4, 2, 3, 5)
    expected = []
    for index in range(3):
        keys, values = torch.randn(shape, generator=generator), torch.randn(shape)
        cache.layer(index)[0].append(keys, values)
        expected.append((keys, values))
    slab = cache.layers[0][0].key.untyped_storage().data_ptr()  # type: ignore[union-attr]
    for order in ([1, 1, 0, 3], [2, 0, 1, 3], [3, 3, 3, 3]):
        rows = torch.tensor(order)
        cache.reorder(rows, memory=False)
        expected = [(keys[rows], values[rows]) for keys, values in expected]
        for (own, _), (keys, values) in zip(cache.layers, expected, strict=True):
            assert torch.equal(own.key, keys) and torch.equal(own.value, values)
            assert own.key.untyped_storage().data_ptr() == slab  # type: ignore[union-attr]
    rows = torch.tensor([2, 0])
    cache.reorder(rows, memory=False)
    for (own, _), (keys, values) in zip(cache.layers, expected, strict=True):
        assert torch.equal(own.key, keys[rows]) and torch.equal(own.value, values[rows])
    with pytest.raises(ValueError, match="capacity"):
        DecoderCache().allocate(1, torch.zeros(1, 1, 1, 1))


def test_reorder_without_memory_keeps_the_cross_attention_caches() -> None:
    """Beams re-ranked within their example read the same source: moving only the
    self-attention rows gives the result of moving everything."""
    config = StackConfig(16, 2, 32, num_layers=2, max_len=32)
    decoder = Decoder(config).double().eval()
    x, memory = torch.randn(1, 5, 16).double(), torch.randn(1, 4, 16).double()
    x, memory = x.expand(3, -1, -1).clone(), memory.expand(3, -1, -1)
    x[1, :3] += 1.0  # three beams of one example with different prefixes
    index = torch.tensor([1, 1, 0])
    results = []
    with torch.no_grad():
        for moves_memory in (True, False):
            cache = DecoderCache(capacity=5)
            decoder(x[:, :3], memory, cache=cache)
            cross_before = cache.layers[0][1].key
            cache.reorder(index, memory=moves_memory)
            assert (cache.layers[0][1].key is cross_before) is not moves_memory
            results.append(decoder(x[index, 3:], memory, cache=cache).last_hidden_state)
    torch.testing.assert_close(results[0], results[1], rtol=0, atol=0)


def test_preallocated_cache_writes_in_place_and_refuses_to_overflow() -> None:
    cache = KVCache(capacity=3)
    key, value = torch.randn(2, 1, 2, 4), torch.randn(2, 1, 2, 4)
    cache.append(key, value)
    buffer = cache.key
    assert buffer is not None
    cache.append(key[:, :, :1], value[:, :, :1])
    assert cache.length == 3 and cache.key is not None
    assert cache.key.data_ptr() == buffer.data_ptr()  # the same memory, not a new tensor
    torch.testing.assert_close(cache.key, torch.cat([key, key[:, :, :1]], dim=2))
    with pytest.raises(RuntimeError, match="full: it holds 3 positions, 3 are cached"):
        cache.append(key[:, :, :1], value[:, :, :1])
    with pytest.raises(ValueError, match="capacity"):
        KVCache(capacity=0)


def test_incremental_decoder_refuses_more_tokens_than_its_max_len(make_model, make_batch) -> None:
    model = make_model()
    encoded, _ = make_batch(model)
    state = IncrementalDecoder(model, encoded, max_len=2)
    for token in (5, 6):
        state.log_probs()
        state.append(torch.full((3,), token))
    assert state.tokens.tolist() == [[5, 6]] * 3
    state.log_probs()  # the step that scores EOS after max_len tokens still fits
    with pytest.raises(RuntimeError, match="at most 2 tokens"):
        state.append(torch.full((3,), 7))


def test_a_source_without_padding_needs_no_cross_attention_mask(make_model) -> None:
    model = make_model()
    source = torch.randint(NUM_SPECIALS, 12, (2, 5))
    padding = torch.zeros(2, 5, dtype=torch.bool)
    with torch.no_grad():
        for has_padding in (False, True):
            padding[0, 3:] = has_padding
            encoded = model.encode(source, padding)
            cache = DecoderCache(capacity=4)
            model.decode(torch.full((2, 1), 2), encoded, cache=cache)
            assert (cache.memory_padding is None) is not has_padding
            cache.reorder(torch.tensor([1, 0]))
            if has_padding:
                assert cache.memory_padding is not None
                assert cache.memory_padding[1].tolist() == padding[0].tolist()


def _ending_early() -> Callable[[Tensor], Tensor]:
    """A ``choose`` under which rows of the tiny random models end at different steps
    (greedy on them repeats one token forever): the argmax, but EOS at the step whose
    number matches the row's second-best id."""
    steps = itertools.count()

    def choose(allowed: Tensor) -> Tensor:
        step = next(steps)
        ranked = allowed.argsort(dim=-1, descending=True)
        return torch.where(ranked[:, 1] == NUM_SPECIALS + step % 8, EOS_ID, ranked[:, 0])

    return choose


@pytest.mark.parametrize("output", OUTPUTS)
def test_looking_for_ended_rows_rarely_decodes_the_same(
    make_model, make_batch, monkeypatch: pytest.MonkeyPatch, output: str
) -> None:
    """On an accelerator the loop looks for ended rows every 8 steps; rows that ended run
    on meanwhile, and what they emit after EOS is masked out."""
    model = make_model(output, "relative")
    encoded, num_extended = make_batch(model, batch=4)
    every_step = autoregressive(
        model, encoded, _ending_early(), max_len=12, num_extended=num_extended
    )
    assert len(set(every_step.lengths)) > 1, "the rows should end at different steps"
    for interval in (3, 8, 100):
        monkeypatch.setattr(greedy_module, "check_interval", lambda device, n=interval: n)
        rarely = autoregressive(
            model, encoded, _ending_early(), max_len=12, num_extended=num_extended
        )
        assert rarely.tokens == every_step.tokens
        assert torch.equal(rarely.finished, every_step.finished)
        torch.testing.assert_close(
            rarely.step_log_probs, every_step.step_log_probs, atol=1e-6, rtol=0
        )
        torch.testing.assert_close(rarely.log_prob, every_step.log_prob, atol=1e-6, rtol=0)


@pytest.mark.parametrize("output", OUTPUTS)
def test_a_row_ending_early_decodes_as_if_alone(make_model, make_batch, output: str) -> None:
    model = make_model(output, "relative")
    encoded, num_extended = make_batch(model, batch=4)
    batch = autoregressive(model, encoded, _ending_early(), max_len=12, num_extended=num_extended)
    assert min(batch.lengths) < max(batch.lengths)
    for row in range(4):
        alone = autoregressive(
            model,
            encoded.index_select(torch.tensor([row])),
            _ending_early(),
            max_len=12,
            num_extended=num_extended,
        )
        assert alone.tokens[0] == batch.tokens[row]
        steps = len(alone.tokens[0]) + 1  # EOS included
        assert alone.step_log_probs.shape[1] == steps
        torch.testing.assert_close(
            batch.step_log_probs[row, :steps], alone.step_log_probs[0], atol=1e-5, rtol=0
        )
        assert float(batch.step_log_probs[row, steps:].abs().sum()) == 0.0  # 0 after EOS
    assert batch.step_log_probs.shape[1] == max(batch.lengths) + 1


@pytest.mark.parametrize("output", OUTPUTS)
def test_static_cache_beam_search_equals_recomputation_in_float64(
    make_model, make_batch, output: str
) -> None:
    model = make_model(output, "rotary").double()
    encoded, num_extended = make_batch(model, batch=3)
    runs = [
        beam_search(
            model,
            encoded,
            beam_size=3,
            max_len=10,
            num_extended=num_extended,
            use_cache=use_cache,
            nbest=True,
        )
        for use_cache in (True, False)
    ]
    cached, full = runs
    assert cached.tokens == full.tokens
    assert cached.nbest is not None and full.nbest is not None
    assert [[h.tokens for h in n] for n in cached.nbest] == [
        [h.tokens for h in n] for n in full.nbest
    ]
    torch.testing.assert_close(cached.log_prob, full.log_prob, atol=1e-10, rtol=0)
    torch.testing.assert_close(cached.step_log_probs, full.step_log_probs, atol=1e-10, rtol=0)


@pytest.mark.parametrize(("output", "positional"), [("pointer", "relative"), ("pointer", "rotary")])
def test_beam_search_looking_for_done_examples_rarely_finds_the_same(
    make_model, make_batch, monkeypatch: pytest.MonkeyPatch, output: str, positional: str
) -> None:
    """Examples finish their K hypotheses at different steps; between two looks a done
    example's beams run on but finish nothing more."""
    model = make_model(output, positional)
    encoded, num_extended = make_batch(model, batch=4)

    def search() -> DecodeResult:
        return beam_search(
            model,
            encoded,
            beam_size=3,
            max_len=12,
            length_penalty=4.0,  # long hypotheses found after "done" would rank first
            num_extended=num_extended,
            nbest=True,
        )

    every_step = search()
    assert every_step.nbest is not None
    assert len({max(len(h.tokens) for h in n) for n in every_step.nbest}) > 1
    for interval in (3, 8):
        monkeypatch.setattr(beam_module, "check_interval", lambda device, n=interval: n)
        rarely = search()
        assert rarely.tokens == every_step.tokens
        assert rarely.nbest == every_step.nbest  # tokens, log-probs and scores, in order
        assert torch.equal(rarely.score, every_step.score)
        assert torch.equal(rarely.step_log_probs, every_step.step_log_probs)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_log_probabilities_keep_a_float64_models_precision(make_model, make_batch, dtype) -> None:
    """A float64 model's scores stay float64 (rounding them to float32 made the exact
    float64 tests above compare rounded values); lower precisions score in float32."""
    model = make_model("vocab", "rotary").to(dtype)
    encoded, _ = make_batch(model, batch=2)
    for result in (
        greedy_module.greedy(model, encoded, max_len=5),
        beam_search(model, encoded, beam_size=2, max_len=5, nbest=True),
    ):
        assert result.step_log_probs.dtype == dtype
        assert result.log_prob.dtype == dtype


@pytest.mark.parametrize("output", OUTPUTS)
def test_a_float64_models_output_layer_computes_in_float64(make_model, make_batch, output) -> None:
    """Log-probabilities were cast to float32 whatever the model: a float64 model's decodes
    on the CPU and on CUDA then differed by one float32 rounding (seen on an H200)."""
    model = make_model(output, "sinusoidal").double()
    encoded, num_extended = make_batch(model, batch=2)
    target = torch.full((2, 3), NUM_SPECIALS)
    with torch.no_grad():
        out = model.decode(target, encoded, num_extended=num_extended)
    assert out.log_probs.dtype == torch.float64
    low = make_model(output, "sinusoidal").to(torch.bfloat16)
    encoded, num_extended = make_batch(low, batch=2)
    with torch.no_grad():
        out = low.decode(target, encoded, num_extended=num_extended)
    assert out.log_probs.dtype == torch.float32  # bf16 logits are upcast
