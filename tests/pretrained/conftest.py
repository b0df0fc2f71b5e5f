"""Fixtures of the pretrained tests: a small random BERT folder (Hugging Face's own
``save_pretrained``) whose WordPiece vocabulary splits some words of the data into several
pieces, the data files, and ``write_toml`` for a fine-tuning config. (``minilm_folder``,
the real checkpoint, is in tests/conftest.py.)"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import torch
import transformers
from tokenizers import Tokenizer
from tokenizers.models import WordPiece
from tokenizers.normalizers import BertNormalizer
from tokenizers.pre_tokenizers import BertPreTokenizer

WORDS = ["the", "cat", "dog", "sat", "ran", "on", "a", "mat", "good", "bad", "film", "very"]
# "sitting" → sit ##ting, "mats" → mat ##s, "films" → film ##s: words of several pieces.
PIECES = ["sit", "##ting", "##s", "."]
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS, *PIECES]
TAGGED = [
    "the/DT cat/NN sat/VBD on/IN the/DT mat/NN ./.",
    "a/DT dog/NN ran/VBD ./.",
    "the/DT dog/NN sitting/VBG on/IN mats/NNS ./.",
    "a/DT cat/NN ran/VBD on/IN a/DT mat/NN ./.",
] * 4
REVIEWS = [
    "good,a very good film .",
    "bad,a bad film .",
    "good,good films",
    "bad,very bad films .",
] * 4


@pytest.fixture(scope="module")
def bert_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A random 2-layer BERT (Hugging Face's own ``save_pretrained``) with a WordPiece
    tokenizer.json over :data:`VOCAB`."""
    torch.manual_seed(0)
    config = transformers.BertConfig(
        vocab_size=len(VOCAB),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        max_position_embeddings=24,
    )
    folder = tmp_path_factory.mktemp("tiny-bert")
    transformers.BertModel(config).save_pretrained(folder)
    tokenizer = Tokenizer(WordPiece({t: i for i, t in enumerate(VOCAB)}, unk_token="[UNK]"))
    tokenizer.normalizer = BertNormalizer(lowercase=True)
    tokenizer.pre_tokenizer = BertPreTokenizer()
    tokenizer.save(str(folder / "tokenizer.json"))
    return folder


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("data")
    (folder / "tagged.txt").write_text("\n".join(TAGGED) + "\n")
    (folder / "reviews.csv").write_text("\n".join(REVIEWS) + "\n")
    return folder


def _write_toml(path: Path, dataset: Path, bert: Path | str, extra: str = "") -> Path:
    path.write_text(
        f'[data]\ndataset = "{dataset}"\nbatch_size = 4\nmax_len = 16\n'
        f'[model]\npretrained = "{bert}"\n{extra}\n'
        "[train]\nepochs = 1\nlr = 1e-3\nwarmup_steps = 0\nthreads = 1\n"
    )
    return path


@pytest.fixture
def write_toml() -> Callable[..., Path]:
    """``write_toml(path, dataset, bert, extra="")``: a one-epoch fine-tuning config."""
    return _write_toml
