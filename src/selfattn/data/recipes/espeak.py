"""espeak-ng from Debian, run from the cache: no installation, no root.

The speech synthesiser (Debian 12's ``espeak-ng`` 1.51, amd64) and the shared libraries
it loads are fetched with ``apt-get download``, pinned by version and SHA-256, and
unpacked into the cache (:mod:`selfattn.data.fetch.debian`); :class:`Espeak` runs the cached
binary with ``LD_LIBRARY_PATH`` on the cached libraries and ``--path`` on the cached
voice data, writing the samples to stdout, so nothing touches the system. Only the
English voices and the voice variants the recipes use are unpacked.

    >>> espeak = Espeak.fetch()
    >>> samples, rate = espeak.synthesize("seven", "en-us+f2")  # (N,) float32, 22050 Hz
"""

from __future__ import annotations

import io
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import soundfile

from selfattn.data.fetch.sources import DebianPackage, DebianSource
from selfattn.datatypes import DataError

#: espeak-ng's English accents (``lang/gmw/en*``).
ACCENTS = (
    "en",
    "en-us",
    "en-gb-scotland",
    "en-gb-x-rp",
    "en-029",
    "en-us-nyc",
    "en-gb-x-gbclan",
    "en-gb-x-gbcwmd",
)
#: espeak-ng's voice variants (``voices/!v``): 7 male, 5 female.
VARIANTS = ("m1", "m2", "m3", "m4", "m5", "m6", "m7", "f1", "f2", "f3", "f4", "f5")

ESPEAK_VERSION = "1.51+dfsg-10+deb12u2"
_LIB = "usr/lib/x86_64-linux-gnu"
_DATA = f"{_LIB}/espeak-ng-data"


def _library(package: str, version: str, sha256: str, size: int, *files: str) -> DebianPackage:
    """A package of shared libraries: ``files`` are ``soname=real`` pairs (or one path).

    The soname symlink is listed before the file it points to, so it is moved while its
    target still sits beside it in the temporary unpacking folder.
    """
    members: list[str] = []
    for pair in files:
        members.extend(f"{_LIB}/{name}" for name in pair.split("="))
    return DebianPackage(package, version, sha256, tuple(members), round(size / 1e6, 2))


_ESPEAK_DATA_FILES = (
    "phondata",
    "phonindex",
    "phontab",
    "intonations",
    "en_dict",
    *(f"lang/gmw/{name}" for name in ("en", "en-US", "en-GB-scotland", "en-GB-x-rp")),
    *(f"lang/gmw/{name}" for name in ("en-029", "en-US-nyc", "en-GB-x-gbclan", "en-GB-x-gbcwmd")),
    *(f"voices/!v/{variant}" for variant in VARIANTS),
)

#: espeak-ng 1.51 for Debian 12 (amd64) and the libraries it loads that a Debian 12 system
#: with Python usually lacks: libpcaudio (audio output, never used here: the samples go to
#: stdout) pulls in libpulse and libsndfile with its codecs.
ESPEAK_PACKAGES = (
    DebianPackage(
        "espeak-ng",
        ESPEAK_VERSION,
        "a11396a690f85f55e6e6b2965505237ddf3dc95c51936aa61de936f1ccf8f4d0",
        ("usr/bin/espeak-ng",),
        0.35,
    ),
    DebianPackage(
        "espeak-ng-data",
        ESPEAK_VERSION,
        "573f5661c6a5adcf949018baad158c4c773bf5579390ee5235a890f1cd694106",
        tuple(f"{_DATA}/{name}" for name in _ESPEAK_DATA_FILES),
        4.26,
    ),
    _library(
        "libespeak-ng1",
        ESPEAK_VERSION,
        "2b127a95b50d92cbd7a615968d2ac1566e1cbc87e27bcda0c2894afb2407c6d2",
        200132,
        "libespeak-ng.so.1=libespeak-ng.so.1.1.51",
    ),
    _library(
        "libpcaudio0",
        "1.2-2",
        "5309759e4d129c7d9a601240cc6e62820ecfa86a1a98e207992ffa6a572dbcd2",
        8800,
        "libpcaudio.so.0=libpcaudio.so.0.0.1",
    ),
    _library(
        "libsonic0",
        "0.2.0-12",
        "9d60de6918ace0b10e3e4e95421befd08aaf03b5b2a3d71ceb799e0cf259916f",
        11024,
        "libsonic.so.0=libsonic.so.0.2.0",
    ),
    _library(
        "libpulse0",
        "16.1+dfsg1-2+b1",
        "7b2c5403cb726312219aad678becc6d6adcee1d8694fdffce0b6ec15ae010831",
        273952,
        "libpulse-simple.so.0=libpulse-simple.so.0.1.1",
        "libpulse.so.0=libpulse.so.0.24.2",
        "pulseaudio/libpulsecommon-16.1.so",
    ),
    _library(
        "libasyncns0",
        "0.8-6+b3",
        "cadaff99f4178b1f580331045621b363abaaefc994e78eecba1857774a3cead2",
        12920,
        "libasyncns.so.0=libasyncns.so.0.3.1",
    ),
    _library(
        "libsndfile1",
        "1.2.0-1+deb12u1",
        "02dc3f08fe8476e82e005f412e3b7289ff641180f33a9be8073f4bde61c85e8e",
        196540,
        "libsndfile.so.1=libsndfile.so.1.0.35",
    ),
    _library(
        "libflac12",
        "1.4.2+ds-2",
        "4d8431c274eef13ec9ee2c0bf988c34b4342367dec053b7f69a432525be5b1fe",
        198124,
        "libFLAC.so.12=libFLAC.so.12.0.0",
    ),
    _library(
        "libvorbis0a",
        "1.3.7-1",
        "01c14f9d1109650077a4c5c337c285476a6932d4d448f5a190c2b845724dbf21",
        93028,
        "libvorbis.so.0=libvorbis.so.0.4.9",
    ),
    _library(
        "libvorbisenc2",
        "1.3.7-1",
        "75dd4d6f904c7db82f5112e60d8efea9e81dfedf94e970c5da7af2b3d81643c0",
        80568,
        "libvorbisenc.so.2=libvorbisenc.so.2.0.12",
    ),
    _library(
        "libopus0",
        "1.3.1-3",
        "c172e212f9039e741916aa8e12f3670d1e049dc0c16685325641288c2d83faa7",
        195192,
        "libopus.so.0=libopus.so.0.8.0",
    ),
    _library(
        "libogg0",
        "1.3.5-3",
        "f67acb0477aed0354f411172e37af338f3ac6bd4f3766134a2cf5539884b5a28",
        23412,
        "libogg.so.0=libogg.so.0.8.5",
    ),
    _library(
        "libmpg123-0",
        "1.31.2-1+deb12u1",
        "a10ad0d59995b859797a5f20d2833672051d0b2c7dab4c71f2e79258b2e3f631",
        146980,
        "libmpg123.so.0=libmpg123.so.0.47.0",
    ),
    _library(
        "libmp3lame0",
        "3.100-6",
        "b1292c749172e7623547ecf684da57d3ec6ca22109f08b11bbb9e6be6e6beb95",
        364932,
        "libmp3lame.so.0=libmp3lame.so.0.0.0",
    ),
)


@dataclass(frozen=True)
class EspeakSource(DebianSource):
    """The espeak-ng packages, named in ``selfattn data list`` as the generator they are."""

    seed: int = 0

    def origin(self) -> str:
        """``Debian espeak-ng=VERSION (+ N libraries), generated (seed S)``."""
        libraries = len(self.packages) - 2  # beside espeak-ng and espeak-ng-data
        return (
            f"Debian espeak-ng={ESPEAK_VERSION} (+ {libraries} libraries), "
            f"generated (seed {self.seed})"
        )


ESPEAK_SOURCE = EspeakSource(ESPEAK_PACKAGES)


class Espeak:
    """The cached espeak-ng binary, run with its cached libraries and voice data.

    Args:
        paths: ``ESPEAK_SOURCE.fetch()``, the binary, voice data and libraries.
    """

    def __init__(self, paths: list[Path]) -> None:
        self.binary = next(p for p in paths if p.name == "espeak-ng")
        phontab = next(p for p in paths if p.name == "phontab")
        self.data_parent = phontab.parent.parent  # the folder holding espeak-ng-data/
        libraries = sorted({str(p.parent) for p in paths if ".so" in p.name})
        self.env = {**os.environ, "LD_LIBRARY_PATH": os.pathsep.join(libraries)}

    @classmethod
    def fetch(cls) -> Espeak:
        """Download the packages if needed (``apt-get download``) and return the synthesiser."""
        return cls(ESPEAK_SOURCE.fetch())

    def synthesize(
        self, text: str, voice: str, *, speed: int = 175, pitch: int = 50
    ) -> tuple[np.ndarray, int]:
        """``text`` spoken by ``voice`` (``en-us+f2``) at ``speed`` words a minute and
        ``pitch`` (0-99): ``(samples (N,) float32, 22050)``.

        Raises:
            DataError: espeak-ng failed (unknown voice, a library missing on this system).
        """
        command = [str(self.binary), f"--path={self.data_parent}", "-v", voice]
        command += ["-s", str(speed), "-p", str(pitch), "--stdout", text]
        result = subprocess.run(
            command, env=self.env, capture_output=True, stdin=subprocess.DEVNULL, check=False
        )
        message = result.stderr.decode(errors="replace").strip()
        if result.returncode != 0 or not result.stdout or message:
            raise DataError(
                f"espeak-ng ({self.binary}) failed on voice {voice!r}: "
                f"{message or f'exit status {result.returncode}'}"
                + ("; install that library with apt-get" if "lib" in message else "")
            )
        samples, rate = soundfile.read(io.BytesIO(result.stdout), dtype="float32")
        return samples, int(rate)
