"""Whisper fixtures shared by the conversion and model tests: a tiny random Whisper
(Hugging Face's own ``save_pretrained``) with a tokenizer holding Whisper's special tokens,
and the real whisper-base folder (fetched and converted, or a skip saying why not)."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
import transformers
from tokenizers import AddedToken, Tokenizer
from tokenizers.models import WordLevel
from tokenizers.pre_tokenizers import WhitespaceSplit

from selfattn.datatypes import DataError
from selfattn.pretrained.recordings import POCKETSPHINX_TESTDATA, Recording, recordings
from selfattn.pretrained.weights import PretrainedError

from ..helpers_pretrained import fetched_weights

#: The tiny model's ordinary words: ids 0 … 49.
WORDS = [f"w{i}" for i in range(50)]
#: Its special tokens and their ids, in Whisper's order.
SPECIALS = {
    "<|endoftext|>": 50,
    "<|startoftranscript|>": 51,
    "<|en|>": 52,
    "<|de|>": 53,
    "<|translate|>": 54,
    "<|transcribe|>": 55,
    "<|notimestamps|>": 56,
}
#: Ids 57 … 63 stand for timestamps: in the vocabulary, not in the tokenizer (as in
#: whisper-base's tokenizer.json).
VOCAB_SIZE = 64
TINY = {
    "vocab_size": VOCAB_SIZE,
    "num_mel_bins": 8,
    "d_model": 16,
    "encoder_layers": 2,
    "encoder_attention_heads": 2,
    "encoder_ffn_dim": 32,
    "decoder_layers": 2,
    "decoder_attention_heads": 2,
    "decoder_ffn_dim": 32,
    "max_source_positions": 12,
    "max_target_positions": 16,
    "pad_token_id": 50,
    "bos_token_id": 50,
    "eos_token_id": 50,
    "decoder_start_token_id": 51,
    # Whisper suppresses its task tokens; here 3, 4 and every special but <|endoftext|>.
    "suppress_tokens": [3, 4, *range(51, 64)],
    "begin_suppress_tokens": [50],
}


def mel_features(batch: int = 2) -> torch.Tensor:
    """Random log-mel features for the tiny Whisper: ``(batch, mel bins, frames)``, the
    frames its encoder's positions take (two per position: the stride-2 convolution)."""
    return torch.randn(batch, TINY["num_mel_bins"], 2 * TINY["max_source_positions"])


def one_line_refusal(read: Callable[[Path], object], path: Path) -> str:
    """The :class:`PretrainedError` that ``read(path)`` raises: one line naming ``path``."""
    with pytest.raises(PretrainedError) as caught:
        read(path)
    message = str(caught.value)
    assert "\n" not in message and str(path) in message
    return message


def write_tokenizer(path: Path, specials: dict[str, int] = SPECIALS) -> Path:
    """A word-level tokenizer.json over :data:`WORDS` with ``specials`` added."""
    tokenizer = Tokenizer(WordLevel({w: i for i, w in enumerate(WORDS)}, unk_token="w0"))
    tokenizer.pre_tokenizer = WhitespaceSplit()
    for token in sorted(specials, key=specials.__getitem__):
        tokenizer.add_special_tokens([AddedToken(token, special=True)])
    assert all(tokenizer.token_to_id(t) == i for t, i in specials.items())
    tokenizer.save(str(path))
    return path


def tiny_whisper(folder: Path, **overrides: object) -> transformers.WhisperForConditionalGeneration:
    """A random tiny Whisper saved into ``folder`` (with a tokenizer), in eval mode."""
    torch.manual_seed(0)
    model = transformers.WhisperForConditionalGeneration(
        transformers.WhisperConfig(**{**TINY, **overrides})
    ).eval()
    # Hugging Face initialises the biases to zero: random ones test that each lands right.
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if name.endswith("bias") or "layer_norm" in name:
                parameter.add_(torch.randn_like(parameter) * 0.1)
    model.save_pretrained(folder)
    write_tokenizer(folder / "tokenizer.json")
    return model


@pytest.fixture(scope="module")
def tiny_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random Whisper folder (``config.json``, ``model.safetensors``, tokenizer)."""
    folder = tmp_path_factory.mktemp("tiny-whisper")
    tiny_whisper(folder)
    return folder


@pytest.fixture(scope="session")
def whisper_folder() -> Path:
    """whisper-base converted to a Hugging Face folder, or a skip saying why it cannot be
    fetched here."""
    return fetched_weights("whisper-base")


def librivox_recordings() -> dict[str, tuple[Path, str]]:
    """Each LibriVox excerpt's id → (its WAV file, its reference words, lower case).

    Raises:
        DataError: the package cannot be fetched (no network, no apt-get).
    """
    return {r.path.stem: (r.path, r.reference) for r in recordings() if r.corpus == "librivox"}


def fetched_recordings() -> list[Recording]:
    """Every pocketsphinx-testdata recording, or a skip saying why they cannot be fetched
    here."""
    if not POCKETSPHINX_TESTDATA.is_fetched() and not shutil.which("apt-get"):
        pytest.skip("pocketsphinx-testdata: needs apt-get to fetch")
    try:
        return recordings()
    except DataError as err:
        pytest.skip(f"pocketsphinx-testdata cannot be fetched here ({err})")


@pytest.fixture(scope="session")
def librivox() -> dict[str, tuple[Path, str]]:
    """:func:`librivox_recordings`, or a skip saying why they cannot be fetched here."""
    fetched_recordings()
    return librivox_recordings()


@pytest.fixture(scope="session")
def cards() -> dict[str, Recording]:
    """The card recordings by id (``001`` … ``005``), or a skip saying why they cannot be
    fetched here."""
    return {r.path.stem: r for r in fetched_recordings() if r.corpus == "cards"}
