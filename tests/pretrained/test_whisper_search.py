"""Beam search and sampling for Whisper through selfattn's own decoders: a beam of one
and sampling at a vanishing temperature are greedy decoding, the cached and recomputed
paths agree, seeds reproduce, and (slow) a beam of five equals transformers'
``generate(num_beams=5)`` on a real recording."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import transformers

from selfattn.decoding.whisper import WhisperAsEncoderDecoder, whisper_search
from selfattn.pretrained.transcribe import Transcriber, greedy_tokens
from selfattn.pretrained.whisper import WhisperModel, load_whisper
from selfattn.speech.whisper_mel import whisper_log_mel

from .whisper_fixtures import TINY

pytestmark = pytest.mark.usefixtures("one_thread")

PREFIX = [51, 52, 55, 56]


@pytest.fixture(scope="module")
def tiny(tiny_folder: Path) -> WhisperModel:
    return load_whisper(tiny_folder)


def _features(seed: int) -> torch.Tensor:
    return torch.randn(TINY["num_mel_bins"], 24, generator=torch.Generator().manual_seed(seed))


def test_a_beam_of_one_and_a_vanishing_temperature_are_greedy_decoding(
    tiny: WhisperModel,
) -> None:
    for seed in range(3):
        features = _features(seed)
        want = greedy_tokens(tiny, features, PREFIX)
        for search in (
            whisper_search("greedy"),
            whisper_search("beam", beam_size=1),
            whisper_search("sample", temperature=1e-6, seed=seed),
            whisper_search("sample", top_k=1, seed=seed),
        ):
            got = search(tiny, features, PREFIX, None)
            assert got.ids == want.ids


def test_suppressed_ids_stay_suppressed_under_the_swapped_ids(tiny: WhisperModel) -> None:
    adapter = WhisperAsEncoderDecoder(tiny, PREFIX)
    perm = adapter.to_whisper
    assert torch.equal(perm[perm], torch.arange(TINY["vocab_size"]))  # its own inverse
    assert int(perm[3]) == TINY["eos_token_id"]  # selfattn's EOS is <|endoftext|>
    assert {int(perm[0]), int(perm[2])} <= set(TINY["suppress_tokens"])  # PAD, BOS
    with torch.no_grad():
        encoded = adapter.encode(_features(0).unsqueeze(0))
        log_probs = adapter.decode(torch.tensor([[2]]), encoded).log_probs[0, -1]
    theirs = log_probs[perm]  # back in Whisper's ids
    banned = TINY["suppress_tokens"] + TINY["begin_suppress_tokens"]
    assert bool(torch.isinf(theirs[banned]).all())
    assert float(theirs.logsumexp(-1)) < 1e-5  # masked, not renormalised
    assert adapter.no_speech is not None and adapter.no_speech.shape == (1, TINY["vocab_size"])


def test_beam_search_with_the_cache_equals_recomputing_the_prefix(tiny: WhisperModel) -> None:
    from selfattn.decoding import beam_search

    adapter = WhisperAsEncoderDecoder(tiny, PREFIX)
    encoded = adapter.encode(torch.stack([_features(1), _features(2)]))
    model: object = adapter
    runs = [
        beam_search(model, encoded, beam_size=3, max_len=adapter.max_len, use_cache=cache)  # type: ignore[arg-type]
        for cache in (True, False)
    ]
    assert runs[0].tokens == runs[1].tokens
    torch.testing.assert_close(runs[0].log_prob, runs[1].log_prob, rtol=1e-5, atol=1e-5)
    for tokens, log_prob in zip(runs[0].tokens, runs[0].log_prob, strict=True):
        assert 3 not in tokens  # EOS ends, never inside
        assert float(log_prob) < 0


def test_sampling_is_reproducible_by_its_seed(tiny: WhisperModel) -> None:
    features = _features(3)
    draws = [
        whisper_search("sample", temperature=3.0, seed=seed)(tiny, features, PREFIX, None).ids
        for seed in (0, 0, 1, 2, 3)
    ]
    assert draws[0] == draws[1]
    assert len({tuple(d) for d in draws}) > 1
    banned = set(TINY["suppress_tokens"])
    assert not any(set(d) & banned for d in draws)


def test_bad_search_options_are_refused_in_one_line() -> None:
    with pytest.raises(ValueError, match="beam_size must be at least 1, got 0"):
        whisper_search("beam", beam_size=0)
    with pytest.raises(ValueError, match="top_p must be in"):
        whisper_search("sample", top_p=1.5)
    with pytest.raises(ValueError, match="not 'nat'"):
        whisper_search("nat")


@pytest.mark.slow
def test_whisper_base_beam_of_five_equals_transformers_generate(
    whisper_folder: Path, librivox: dict[str, tuple[Path, str]]
) -> None:
    from selfattn.data.readers.audio import read_wav
    from selfattn.pretrained.recordings import recordings

    ours = Transcriber(whisper_folder)
    theirs = transformers.WhisperForConditionalGeneration.from_pretrained(whisper_folder).eval()
    # "Seven of clubs": a recording where the beam finds what greedy decoding misses.
    wav = next(r.path for r in recordings() if r.path.stem == "003")
    samples, _ = read_wav(wav, sample_rate=16000)
    features = whisper_log_mel(samples)
    # Ranked by the plain sum on both sides: their length penalty is not GNMT's.
    search = whisper_search("beam", beam_size=5, length_penalty=0.0)
    ids = search(ours.model, features, ours.prefix, None).ids
    with torch.no_grad():
        generated = theirs.generate(
            features.unsqueeze(0), language="en", task="transcribe", num_beams=5, length_penalty=0.0
        )[0].tolist()
    assert ids == [i for i in generated if i < ours.tokenizer.eot_id]
    assert ids != greedy_tokens(ours.model, features, ours.prefix).ids
