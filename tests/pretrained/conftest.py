"""Fixtures of the pretrained tests: a small random BERT folder (Hugging Face's own
``save_pretrained``) whose WordPiece vocabulary splits some words of the data into several
pieces, the data files, and ``fine_tuning``: a test's fine-tuning configs, runs and
refusals. (``minilm_folder``, the real checkpoint, is in tests/conftest.py.) The Whisper
tests' fixtures (tiny_folder, whisper_folder, librivox, cards) are in whisper_fixtures.py and
served from here to every test of the folder."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest
import torch
import transformers
from tokenizers import Tokenizer
from tokenizers.models import WordPiece
from tokenizers.normalizers import BertNormalizer
from tokenizers.pre_tokenizers import BertPreTokenizer

from selfattn.cli.main import main
from selfattn.config import Config, DataConfig, TrainConfig, model_options

from ..helpers_cli import one_line_error, set_flags, toml_table, write_config
from .whisper_fixtures import cards, librivox, tiny_folder, whisper_folder

__all__ = ["cards", "librivox", "tiny_folder", "whisper_folder"]  # the Whisper tests' fixtures

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
    sizes = {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4}
    config = transformers.BertConfig(**sizes, intermediate_size=64, **TINY)
    return random_folder(tmp_path_factory, "tiny-bert", transformers.BertModel, config)


@pytest.fixture(scope="module")
def distilbert_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A random 3-layer DistilBERT with the same tokenizer.json."""
    config = transformers.DistilBertConfig(dim=32, n_layers=3, n_heads=4, hidden_dim=64, **TINY)
    return random_folder(tmp_path_factory, "tiny-distilbert", transformers.DistilBertModel, config)


#: What both tiny checkpoints share: the vocabulary and 24 positions.
TINY = {"vocab_size": len(VOCAB), "max_position_embeddings": 24}


def random_folder(
    factory: pytest.TempPathFactory, name: str, model_class: type, config: object
) -> Path:
    """``model_class(config)`` with seed-0 random weights, saved with :func:`write_tokenizer`
    in a new folder ``name``."""
    torch.manual_seed(0)
    folder = factory.mktemp(name)
    model_class(config).save_pretrained(folder)
    write_tokenizer(folder)
    return folder


def write_tokenizer(folder: Path) -> None:
    """A lowercasing WordPiece tokenizer.json over :data:`VOCAB` in ``folder``."""
    tokenizer = Tokenizer(WordPiece({t: i for i, t in enumerate(VOCAB)}, unk_token="[UNK]"))
    tokenizer.normalizer = BertNormalizer(lowercase=True)
    tokenizer.pre_tokenizer = BertPreTokenizer()
    tokenizer.save(str(folder / "tokenizer.json"))


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("data")
    (folder / "tagged.txt").write_text("\n".join(TAGGED) + "\n")
    (folder / "reviews.csv").write_text("\n".join(REVIEWS) + "\n")
    return folder


@dataclass
class FineTuning:
    """One fine-tuning test's set-up: the small BERT, the data files, the test's own folder
    and its captured output."""

    bert: Path
    data: Path
    tmp: Path
    capsys: pytest.CaptureFixture[str]

    def config(
        self,
        dataset: str | Path,
        *,
        bert: Path | str | None = None,
        model: dict[str, object] | None = None,
        train: dict[str, object] | None = None,
    ) -> Config:
        """The one-epoch fine-tuning :class:`Config` of ``bert`` (the small BERT unless
        given) on ``dataset`` (a file of :attr:`data`), run in ``tmp/run``."""
        return Config(
            data=DataConfig(dataset=str(self.data / dataset), **SETTINGS["data"]),  # type: ignore[arg-type]
            model=model_options(pretrained=str(bert or self.bert), **(model or {})),  # type: ignore[arg-type]
            train=TrainConfig(**{**SETTINGS["train"], **(train or {})}),  # type: ignore[arg-type]
            run_dir=self.tmp / "run",
        )

    def toml(
        self,
        dataset: str | Path,
        extra: str = "",
        *,
        bert: Path | None = None,
        name: str = "c.toml",
        data: dict[str, object] | None = None,
    ) -> Path:
        """The same config as a file ``tmp/name``: ``dataset`` a file of :attr:`data` or any
        path; ``extra``: more ``[model]`` lines; ``data``: more ``[data]`` fields."""
        model = toml_table({"pretrained": bert or self.bert}) + extra
        return write_config(
            self.tmp / name,
            data={"dataset": self.data / dataset, **SETTINGS["data"], **(data or {})},
            model=model,
            train=SETTINGS["train"],
        )

    def train(self, toml: Path, run_dir: Path, *argv: str) -> Path:
        """Train ``toml`` into ``run_dir``; returns ``run_dir``."""
        assert (
            main(["train", str(toml), "--set", f"run_dir={run_dir}", "--no-progress", *argv]) == 0
        )
        return run_dir

    def refusal(self, toml: Path, *settings: str) -> str:
        """The one-line error of training ``toml`` with ``settings`` (``--set`` each)."""
        argv = ["train", str(toml), *set_flags(*settings, f"run_dir={self.tmp / 'r'}")]
        return one_line_error(self.capsys, argv)


#: What every fine-tuning config of these tests sets, by section.
SETTINGS: dict[str, dict[str, object]] = {
    "data": {"batch_size": 4, "max_len": 16},
    "train": {"epochs": 1, "lr": 1e-3, "warmup_steps": 0, "threads": 1},
}


@pytest.fixture
def fine_tuning(
    bert_folder: Path, data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> FineTuning:
    """:class:`FineTuning` for one test."""
    return FineTuning(bert_folder, data, tmp_path, capsys)
