"""Real recordings with transcripts to measure a speech model on: Debian's
pocketsphinx-testdata, fetched (``apt-get download``) and checked by SHA-256 on first use.

* ``librivox``: five excerpts of *Sense and Sensibility* read for LibriVox (16 kHz WAV,
  3–7 s, 71 words);
* ``cards``: five recordings of playing cards named aloud (1–3.5 s, 21 words).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from selfattn.data.fetch.sources import DebianPackage

__all__ = ["CARDS_IDS", "LIBRIVOX_IDS", "POCKETSPHINX_TESTDATA", "Recording", "recordings"]

_DATA = "usr/share/pocketsphinx/test/data"
#: The LibriVox excerpts' ids (their WAV files' stems).
LIBRIVOX_IDS = tuple(
    f"sense_and_sensibility_01_austen_64kb-{n:04d}" for n in (870, 880, 890, 920, 930)
)
#: The card recordings' ids.
CARDS_IDS = ("001", "002", "003", "004", "005")
POCKETSPHINX_TESTDATA = DebianPackage(
    package="pocketsphinx-testdata",
    version="0.8+5prealpha+1-15",
    sha256="eaeb7a01d54f20b799d1a81ef110ec544b2cb47ea006614078220737a33019f0",
    members=(
        f"{_DATA}/librivox/transcription",
        *(f"{_DATA}/librivox/{i}.wav" for i in LIBRIVOX_IDS),
        f"{_DATA}/cards/cards.transcription",
        *(f"{_DATA}/cards/{i}.wav" for i in CARDS_IDS),
    ),
    download_mb=1.8,
)


@dataclass(frozen=True)
class Recording:
    """One recording: its set (``librivox`` or ``cards``), its WAV file and its reference
    words (lower case, as the transcription files write them)."""

    corpus: str
    path: Path
    reference: str


def recordings() -> list[Recording]:
    """Every recording, LibriVox's first, fetched on first use.

    Raises:
        DataError: the package cannot be fetched (no network, no apt-get).
    """
    files = {path.name: path for path in POCKETSPHINX_TESTDATA.fetch()}
    references: dict[str, str] = {}
    for name in ("transcription", "cards.transcription"):
        for line in files[name].read_text().splitlines():
            words, _, utterance = line.rpartition("(")
            text = words.replace("<s>", "").replace("</s>", "").strip()
            references[utterance.rstrip(")").strip()] = text
    return [
        Recording(corpus, files[f"{i}.wav"], references[i])
        for corpus, ids in (("librivox", LIBRIVOX_IDS), ("cards", CARDS_IDS))
        for i in ids
    ]
