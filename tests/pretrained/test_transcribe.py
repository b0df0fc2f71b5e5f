"""Transcribing a recording: greedy decoding from Whisper's task prefix with the KV cache
equals a full recomputation by Hugging Face's model (tiny) and transformers' own greedy
``generate`` (slow, whisper-base on every LibriVox recording); bad recordings and folders
are refused in one line; silence gives an empty transcript."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import numpy as np
import pytest
import soundfile
import torch
import transformers

from selfattn.datatypes import DataError
from selfattn.pretrained.errors import PretrainedError
from selfattn.pretrained.transcribe import (
    Transcriber,
    greedy_tokens,
    transcribe,
    transcript_words,
    word_error_rate,
)
from selfattn.pretrained.whisper import load_whisper
from selfattn.speech.whisper_mel import whisper_log_mel

from .whisper_fixtures import SPECIALS, TINY, tiny_whisper, write_tokenizer

pytestmark = pytest.mark.usefixtures("one_thread")

PREFIX = [51, 52, 55, 56]  # <|startoftranscript|> <|en|> <|transcribe|> <|notimestamps|>
#: The tiny model reads 2 × 12 frames of 10 ms.
TINY_SECONDS = 0.24


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> tuple[transformers.PreTrainedModel, Path]:
    folder = tmp_path_factory.mktemp("tiny-transcribe")
    return tiny_whisper(folder), folder


def _wav(path: Path, seconds: float, amplitude: float = 0.3) -> Path:
    rng = np.random.default_rng(1)
    samples = (amplitude * rng.standard_normal(int(seconds * 16000))).astype(np.float32)
    soundfile.write(str(path), samples, 16000)
    return path


def _reference_greedy(model: transformers.PreTrainedModel, features: torch.Tensor) -> list[int]:
    """Greedy decoding by full recomputation with Hugging Face's model, suppressing as
    Whisper does."""
    tokens = list(PREFIX)
    with torch.no_grad():
        while len(tokens) < TINY["max_target_positions"]:
            logits = model(
                input_features=features.unsqueeze(0), decoder_input_ids=torch.tensor([tokens])
            ).logits[0, -1]
            banned = TINY["suppress_tokens"] + (
                TINY["begin_suppress_tokens"] if len(tokens) == len(PREFIX) else []
            )
            logits[banned] = float("-inf")
            token = int(logits.argmax())
            if token == TINY["eos_token_id"]:
                break
            tokens.append(token)
    return tokens[len(PREFIX) :]


def test_greedy_with_the_cache_equals_hugging_faces_full_recomputation(
    tiny: tuple[transformers.PreTrainedModel, Path],
) -> None:
    theirs, folder = tiny
    ours = load_whisper(folder)
    for seed in range(3):
        features = torch.randn(
            TINY["num_mel_bins"], 24, generator=torch.Generator().manual_seed(seed)
        )
        decoded = greedy_tokens(ours, features, PREFIX)
        assert decoded.ids == _reference_greedy(theirs, features)
        assert decoded.mean_log_prob < 0


def test_suppressed_tokens_are_never_emitted(
    tiny: tuple[transformers.PreTrainedModel, Path],
) -> None:
    _, folder = tiny
    model = load_whisper(folder)
    features = torch.randn(TINY["num_mel_bins"], 24)
    free = greedy_tokens(model, features, PREFIX, max_new_tokens=6).ids
    model.config = dataclasses.replace(
        model.config,
        suppress_tokens=tuple(i for i in range(TINY["vocab_size"]) if i not in (7, 50)),
    )
    forced = greedy_tokens(model, features, PREFIX, max_new_tokens=6).ids
    assert set(forced) <= {7} and forced != free


def test_a_recording_is_transcribed_from_the_task_prefix(
    tiny: tuple[transformers.PreTrainedModel, Path], tmp_path: Path
) -> None:
    theirs, folder = tiny
    wav = _wav(tmp_path / "a.wav", 0.2)
    samples, _ = soundfile.read(str(wav), dtype="float32")
    features = whisper_log_mel(samples, n_mels=TINY["num_mel_bins"], num_samples=3840)
    ids = _reference_greedy(theirs, features)
    text = transcribe(folder, wav)
    words = [f"w{i}" for i in ids if i < SPECIALS["<|endoftext|>"]]
    assert text.split() == words and words


def test_a_recording_longer_than_the_model_reads_is_refused_with_its_length(
    tiny: tuple[transformers.PreTrainedModel, Path], tmp_path: Path
) -> None:
    _, folder = tiny
    wav = _wav(tmp_path / "long.wav", 0.3)
    with pytest.raises(PretrainedError) as caught:
        transcribe(folder, wav)
    message = str(caught.value)
    assert f"{wav}: 0.3 s long; Whisper reads at most {TINY_SECONDS:g} s" in message
    assert "\n" not in message


def test_an_empty_recording_is_refused_in_one_line(
    tiny: tuple[transformers.PreTrainedModel, Path], tmp_path: Path
) -> None:
    _, folder = tiny
    wav = tmp_path / "empty.wav"
    soundfile.write(str(wav), np.zeros(0, np.float32), 16000)
    with pytest.raises(DataError, match=r"empty.wav: empty WAV file \(no samples\)$"):
        transcribe(folder, wav)


def test_a_silent_recording_has_an_empty_transcript(
    tiny: tuple[transformers.PreTrainedModel, Path], tmp_path: Path
) -> None:
    _, folder = tiny
    assert transcribe(folder, _wav(tmp_path / "silent.wav", 0.2, amplitude=0.0)) == ""
    assert transcribe(folder, _wav(tmp_path / "loud.wav", 0.2)) != ""


def test_a_tokenizer_without_whispers_special_tokens_is_refused(
    tiny: tuple[transformers.PreTrainedModel, Path], tmp_path: Path
) -> None:
    _, folder = tiny
    copy = tmp_path / "copy"
    shutil.copytree(folder, copy)
    write_tokenizer(copy / "tokenizer.json", {"<|endoftext|>": 50})
    with pytest.raises(PretrainedError, match="lacks Whisper's special tokens") as caught:
        Transcriber(copy)
    assert "<|startoftranscript|>" in str(caught.value)
    with pytest.raises(PretrainedError, match=r"no language token <\|fr\|>"):
        Transcriber(folder, language="fr")


@pytest.fixture(scope="module")
def real(whisper_folder: Path) -> tuple[Transcriber, transformers.PreTrainedModel]:
    theirs = transformers.WhisperForConditionalGeneration.from_pretrained(whisper_folder)
    return Transcriber(whisper_folder), theirs.eval()


@pytest.mark.slow
@pytest.mark.parametrize("index", range(5))
def test_whisper_base_greedy_equals_transformers_generate_on_real_recordings(
    index: int,
    real: tuple[Transcriber, transformers.PreTrainedModel],
    librivox: dict[str, tuple[Path, str]],
) -> None:
    from selfattn.data.readers.audio import read_wav

    ours, theirs = real
    wav, reference = list(librivox.values())[index]
    samples, _ = read_wav(wav, sample_rate=16000)
    features = whisper_log_mel(samples)
    ids = greedy_tokens(ours.model, features, ours.prefix).ids
    with torch.no_grad():
        generated = theirs.generate(
            features.unsqueeze(0), language="en", task="transcribe", do_sample=False, num_beams=1
        )[0].tolist()
    assert ids == [i for i in generated if i < ours.tokenizer.eot_id]
    assert word_error_rate([ours.tokenizer.decode(ids)], [reference]) <= 0.1


def test_word_error_rate_compares_words_as_references_write_them() -> None:
    assert transcript_words("10 of Clubs, 4 Queen!") == ["ten", "of", "clubs", "four", "queen"]
    assert transcript_words("Mr. Dashwood's ill-disposed, cold-hearted.") == [
        "mister",
        "dashwood's",
        "ill",
        "disposed",
        "cold",
        "hearted",
    ]
    assert word_error_rate(
        ["He was not an ill-disposed man."], ["he was not ill disposed young man"]
    ) == (pytest.approx(2 / 7))


def test_predict_on_a_whisper_folder_prints_the_transcript(
    tiny: tuple[transformers.PreTrainedModel, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``selfattn predict FOLDER recording.wav``: a Whisper checkpoint is a run too."""
    from selfattn.cli.main import main

    _, folder = tiny
    wav = _wav(tmp_path / "a.wav", 0.2)
    assert main(["predict", str(folder), str(wav)]) == 0
    assert capsys.readouterr().out.strip() == transcribe(folder, wav)
    # A beam of one is greedy decoding; options Whisper does not read are refused.
    assert main(["predict", str(folder), str(wav), "--beam", "1"]) == 0
    assert capsys.readouterr().out.strip() == transcribe(folder, wav)
    assert main(["predict", str(folder), str(wav), "--sample", "--seed", "3"]) == 0
    assert capsys.readouterr().out.strip()
    assert main(["predict", str(folder), str(wav), "--beam", "1", "--length-penalty", "0"]) == 0
    assert capsys.readouterr().out.strip() == transcribe(folder, wav)
    for bad, message in (
        (["--nat"], "--nat does not apply to a Whisper checkpoint"),
        (["--length-scale", "2"], "--length-scale does not apply to a Whisper checkpoint"),
        (["--temperature", "0.5"], "--temperature needs --sample"),
        (["--truncate"], "--truncate does not apply to a Whisper checkpoint"),
        (["--length-penalty", "0"], "--length-penalty applies to beam search, not greedy"),
    ):
        assert main(["predict", str(folder), str(wav), *bad]) == 2
        error = capsys.readouterr().err.strip()
        assert message in error and "\n" not in error
