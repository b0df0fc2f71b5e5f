"""Whisper's temperature fallback and no-speech rule: the checks (compression ratio, mean
log-probability, no speech), a repetitive decoding sent to the fallback and the first
passing one kept, sampling's best-of, the command line's options and their refusals, and
(slow) whisper-base on a real recording, which passes at temperature 0."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import soundfile
import torch

from selfattn.cli.main import main
from selfattn.decoding import sample
from selfattn.decoding.whisper import WhisperAsEncoderDecoder, fallback_searches, whisper_search
from selfattn.pretrained.fallback import (
    Decoded,
    DecodingChecks,
    compression_ratio,
    fallback_temperatures,
)
from selfattn.pretrained.transcribe import SearchFn, Transcriber, greedy_tokens, word_error_rate
from selfattn.pretrained.whisper import WhisperModel, load_whisper

from .whisper_fixtures import TINY

pytestmark = pytest.mark.usefixtures("one_thread")

PREFIX = [51, 52, 55, 56]
LOOP = Decoded([5] * 12, -0.1, 0.0)  # "w5 w5 … w5": compresses 3-fold
SURE = Decoded([7, 8, 9], -0.2, 0.0)


def test_a_loop_compresses_and_a_sentence_does_not() -> None:
    assert compression_ratio("He was not an ill-disposed young man.") < 1.2
    assert compression_ratio("five " * 40) > 8
    assert compression_ratio("") == 0.0


def test_the_checks_send_loops_and_unsure_decodings_back_but_not_silence() -> None:
    checks = DecodingChecks()
    assert checks.needs_fallback(LOOP, "w5 " * 12)
    assert not checks.needs_fallback(SURE, "w7 w8 w9")
    unsure = Decoded([7, 8, 9], -1.5, 0.1)
    assert checks.needs_fallback(unsure, "w7 w8 w9")
    # Probably no speech and unsure: silence, which no temperature mends.
    silence = Decoded([7], -1.5, 0.9)
    assert not checks.needs_fallback(silence, "w7") and checks.is_silence(silence)
    assert not checks.is_silence(Decoded([7], -0.5, 0.9))  # confident words are kept
    assert not DecodingChecks(compression_ratio=4).needs_fallback(LOOP, "w5 " * 12)
    assert DecodingChecks(log_prob=-0.1).needs_fallback(SURE, "w7 w8 w9")


def test_the_fallback_temperatures_and_the_thresholds_ranges() -> None:
    assert fallback_temperatures() == [0.2, 0.4, 0.6, 0.8, 1.0]
    assert fallback_temperatures(0.5) == [0.5, 1.0]
    assert fallback_temperatures(0.3) == [0.3, 0.6, 0.9]
    for step in (0, -0.2, 1.5, float("nan")):
        with pytest.raises(ValueError, match=r"temperature step must be in \(0, 1\]"):
            fallback_temperatures(step)
    for field, value, words in (
        ("compression_ratio", 0, "> 0"),
        ("log_prob", 0.5, "<= 0"),
        ("no_speech", 1.5, r"in \[0, 1\]"),
        ("no_speech", float("nan"), r"in \[0, 1\]"),
        ("compression_ratio", float("inf"), "> 0"),
    ):
        with pytest.raises(ValueError, match=f"the {field.replace('_', ' ')} threshold must "):
            DecodingChecks(**{field: value})
        with pytest.raises(ValueError, match=words):
            DecodingChecks(**{field: value})
    with pytest.raises(ValueError, match="best_of must be an integer >= 1, got 0"):
        whisper_search("sample", best_of=0)


def _scripted(found: list[Decoded], calls: list[int]) -> list[SearchFn]:
    """Searches returning ``found[i]``, each noting its index in ``calls``."""

    def search_number(i: int) -> SearchFn:
        def search(*_: object) -> Decoded:
            calls.append(i)
            return found[i]

        return search

    return [search_number(i) for i in range(len(found))]


def test_a_repetitive_decoding_is_retried_hotter_until_one_passes(tiny_folder: Path) -> None:
    calls: list[int] = []
    first, *hotter = _scripted([LOOP, LOOP, SURE, LOOP], calls)
    transcriber = Transcriber(
        tiny_folder, search=first, fallback=list(zip([0.2, 0.4, 0.6], hotter, strict=True))
    )
    samples = np.full(3200, 0.3, dtype=np.float32)
    attempts = transcriber.attempts(samples)
    assert [a.temperature for a in attempts] == [0.0, 0.2, 0.4] and calls == [0, 1, 2]
    assert attempts[0].text == " ".join(["w5"] * 12) and attempts[-1].text == "w7 w8 w9"
    assert transcriber.transcribe_samples(samples) == "w7 w8 w9"
    # None passes: the last is kept; without a fallback the loop stays.
    calls.clear()
    first, *hotter = _scripted([LOOP, LOOP], calls)
    transcriber.search, transcriber.fallback = first, [(1.0, hotter[0])]
    assert len(transcriber.attempts(samples)) == 2 and calls == [0, 1]
    transcriber.fallback = []
    assert transcriber.transcribe_samples(samples).startswith("w5 w5")


def test_the_tiny_whisper_falls_back_through_selfattns_sampling(tiny_folder: Path) -> None:
    """No decoding passes a log-probability threshold of 0: every temperature is tried,
    each by selfattn's sampling, reproducibly."""
    searches = fallback_searches(0.5, best_of=2, seed=1)
    transcriber = Transcriber(tiny_folder, fallback=searches, checks=DecodingChecks(log_prob=0))
    samples = np.random.default_rng(0).standard_normal(3840).astype(np.float32) * 0.3
    attempts = transcriber.attempts(samples)
    assert [a.temperature for a in attempts] == [0.0, 0.5, 1.0]
    model = transcriber.model
    greedy = greedy_tokens(model, transcriber.features(samples), transcriber.prefix)
    assert attempts[0].decoded.ids == greedy.ids
    assert [a.decoded for a in transcriber.attempts(samples)] == [a.decoded for a in attempts]


def test_the_mean_log_prob_is_whispers_over_the_tokens_it_may_emit(tiny_folder: Path) -> None:
    """Greedy decoding and the searches measure it alike, renormalised over the tokens not
    suppressed (as openai-whisper and transformers do): above the whole vocabulary's."""
    model = load_whisper(tiny_folder)
    features = torch.randn(TINY["num_mel_bins"], 24, generator=torch.Generator().manual_seed(2))
    greedy = greedy_tokens(model, features, PREFIX)
    for method in ("greedy", "beam"):
        found = whisper_search(method, beam_size=1)(model, features, PREFIX, None)
        assert found.ids == greedy.ids
        assert found.mean_log_prob == pytest.approx(greedy.mean_log_prob, abs=1e-5)
    with torch.no_grad():
        logits = model.decoder(torch.tensor([PREFIX + greedy.ids]), model.encoder(features[None]))
    ended = len(greedy.ids) < TINY["max_target_positions"] - len(PREFIX)
    targets = torch.tensor([*greedy.ids, TINY["eos_token_id"]][: len(greedy.ids) + ended])
    whole = logits[0, len(PREFIX) - 1 :].log_softmax(-1)[: len(targets)]
    mean = float(whole.gather(1, targets[:, None]).sum()) / (len(greedy.ids) + 1)
    assert greedy.mean_log_prob > mean + 1e-3


def test_sampling_keeps_the_best_of_its_draws(tiny_folder: Path) -> None:
    model: WhisperModel = load_whisper(tiny_folder)
    features = torch.randn(TINY["num_mel_bins"], 24, generator=torch.Generator().manual_seed(4))
    best = whisper_search("sample", temperature=2.0, seed=5, best_of=4)(model, features, PREFIX, 3)
    adapter = WhisperAsEncoderDecoder(model, PREFIX)
    rows = adapter.encode(features.unsqueeze(0)).index_select(torch.zeros(4, dtype=torch.long))
    generator = torch.Generator().manual_seed(5)
    with torch.no_grad():
        drawn = sample(
            adapter,  # type: ignore[arg-type]
            rows,
            max_len=adapter.max_len,
            temperature=2.0,
            generator=generator,
        )
    ids = [[int(adapter.to_whisper[i]) for i in row] for row in drawn.tokens]
    means = [
        adapter.mean_log_prob(row, rows.memory[:1], finished=bool(drawn.finished[r]))
        for r, row in enumerate(ids)
    ]
    assert len(set(means)) > 1  # the draws differ
    assert best.mean_log_prob == pytest.approx(max(means))


def _wav(path: Path) -> Path:
    samples = 0.3 * np.random.default_rng(1).standard_normal(3200)
    soundfile.write(str(path), samples.astype(np.float32), 16000)
    return path


def test_predict_takes_the_fallback_options_and_refuses_bad_ones(
    tiny_folder: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    wav, folder = str(_wav(tmp_path / "a.wav")), str(tiny_folder)
    assert main(["predict", folder, wav]) == 0
    plain = capsys.readouterr().out
    # A recording that passes at temperature 0 is transcribed as without the fallback.
    passes = ["--compression-ratio-threshold", "100", "--logprob-threshold", "-100"]
    assert main(["predict", folder, wav, "--temperature-fallback", *passes]) == 0
    assert capsys.readouterr().out == plain
    forced = ["--temperature-fallback", "--logprob-threshold", "0", "--fallback-step", "1"]
    for extra in ([], ["--beam", "2"], ["--best-of", "1", "--seed", "3"]):
        assert main(["predict", folder, wav, *forced, *extra]) == 0
        assert capsys.readouterr().out.strip()
    for bad, message in (
        (["--fallback-step", "0.5"], "--fallback-step needs --temperature-fallback"),
        (["--best-of", "2"], "--best-of needs --temperature-fallback"),
        (["--temperature-fallback", "--sample"], "does not combine with --sample"),
        (["--temperature-fallback", "--fallback-step", "0"], "--fallback-step must be in (0, 1]"),
        (["--temperature-fallback", "--best-of", "0"], "--best-of must be at least 1, got 0"),
        (["--compression-ratio-threshold", "2"], "--compression-ratio-threshold needs"),
        (
            ["--temperature-fallback", "--compression-ratio-threshold", "-1"],
            "--compression-ratio-threshold must be > 0, got -1.0",
        ),
        (["--logprob-threshold", "0.5"], "--logprob-threshold must be <= 0, got 0.5"),
        (["--no-speech-threshold", "1.5"], "--no-speech-threshold must be in [0, 1], got 1.5"),
        (["--no-speech-threshold", "nan"], "--no-speech-threshold must be in [0, 1], got nan"),
    ):
        assert main(["predict", folder, wav, *bad]) == 2, bad
        error = capsys.readouterr().err.strip()
        assert message in error and "\n" not in error, error
    run = tmp_path / "not-a-run"
    run.mkdir()
    for flag in (["--temperature-fallback"], ["--no-speech-threshold", "0.5"]):
        assert main(["predict", str(run), "hello", *flag]) == 2
        error = capsys.readouterr().err.strip()
        assert f"{flag[0]} applies to Whisper checkpoints only" in error and "\n" not in error


@pytest.mark.slow
def test_whisper_base_passes_at_temperature_zero_on_a_real_recording(
    whisper_folder: Path, librivox: dict[str, tuple[Path, str]]
) -> None:
    from selfattn.data.readers.audio import read_wav

    wav, reference = next(iter(librivox.values()))
    samples, _ = read_wav(wav, sample_rate=16000)
    transcriber = Transcriber(whisper_folder, encoder_seconds=15, fallback=fallback_searches())
    attempts = transcriber.attempts(samples)
    assert len(attempts) == 1  # confident and not a loop: no sampling
    kept = attempts[0]
    assert kept.decoded.mean_log_prob > -1.0 and compression_ratio(kept.text) < 2.4
    assert word_error_rate([kept.text], [reference]) <= 0.1
