"""Fetch data files that ship inside Debian packages, verify them, and cache them.

The Debian counterpart of :mod:`selfattn.data.fetch.cache`: a recipe names a package, an exact
version and the ``.deb``'s SHA-256; :func:`fetch_deb` runs ``apt-get download`` (no root
and no installation needed) in a temporary folder of the cache, checks the checksum and
moves the file into place; :func:`extract_deb_members` unpacks the ``.deb`` with
``dpkg-deb -x`` into a temporary folder and moves the wanted files into the cache with
:func:`os.replace`. An interrupted fetch therefore never leaves a half-written file where
a later run would trust it, and a ``.deb`` downloaded by hand into :func:`deb_dir` is
used as it is.

Cache layout (under :func:`~selfattn.data.fetch.cache.cache_root`)::

    debian/PACKAGE_VERSION/PACKAGE_VERSION_all.deb
    extracted/debian/PACKAGE-VERSION/usr/share/…     (the members, at their paths)
"""

from __future__ import annotations

import os
import shlex
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path, PurePosixPath

from selfattn.data.fetch.cache import _find_verified, cache_root, keep_verified
from selfattn.datatypes import DataError


def deb_dir(package: str, version: str) -> Path:
    """Where the downloaded ``.deb`` of ``package=version`` lives in the cache."""
    return cache_root() / "debian" / f"{package}_{version}"


def extracted_dir(package: str, version: str) -> Path:
    """The folder that mirrors the package's file tree for the members fetched so far."""
    return cache_root() / "extracted" / "debian" / f"{package}-{version}"


def deb_member_path(package: str, version: str, member: str) -> Path:
    """Where :func:`fetch_deb_members` keeps ``member`` (a path inside the package)."""
    return extracted_dir(package, version) / PurePosixPath(member)


def apt_download_command(package: str, version: str) -> list[str]:
    """The ``apt-get download`` command that fetches exactly one ``.deb`` into the cwd."""
    return ["apt-get", "download", "-q", f"{package}={version}"]


def _by_hand(package: str, version: str) -> str:
    folder = shlex.quote(str(deb_dir(package, version)))
    return (
        f"mkdir -p {folder} && cd {folder} && {shlex.join(apt_download_command(package, version))}"
    )


def _run_apt(command: list[str], cwd: Path) -> None:
    """Run apt-get in ``cwd``; a separate function so tests can replace the network step."""
    subprocess.run(command, check=True, cwd=cwd, stdin=subprocess.DEVNULL)


def _run_dpkg_deb(command: list[str]) -> None:
    """Run dpkg-deb; a separate function so tests can simulate a system without it."""
    subprocess.run(command, check=True, stdin=subprocess.DEVNULL)


def _failure(err: OSError | subprocess.CalledProcessError, tool: str) -> str:
    if isinstance(err, subprocess.CalledProcessError):
        return f"{tool} exited with status {err.returncode}, see its message above"
    if isinstance(err, FileNotFoundError):
        return f"{tool} not found; it comes with Debian / Ubuntu"
    return str(err)


def fetch_deb(package: str, version: str, *, sha256: str) -> Path:
    """Download the ``.deb`` of ``package=version`` once and return its cached path.

    A cached ``.deb`` whose checksum matches is returned without touching the network.

    Args:
        package: Debian binary package name.
        version: exact Debian version (``1.9-6``).
        sha256: expected hex SHA-256 of the ``.deb``.

    Raises:
        DataError: apt-get is missing or failed, or the checksum is not ``sha256``; the
            message names the command to run by hand.
    """
    final_dir = deb_dir(package, version)
    cached = _find_verified(final_dir, sha256)
    if cached is not None:
        return cached

    final_dir.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=final_dir.parent, prefix=".download-") as tmp:
        try:
            _run_apt(apt_download_command(package, version), Path(tmp))
        except (OSError, subprocess.CalledProcessError) as err:
            raise DataError(
                f"could not download {package}={version} from Debian "
                f"({_failure(err, 'apt-get')}); run by hand: {_by_hand(package, version)}"
            ) from None
        files = [p for p in Path(tmp).iterdir() if p.is_file() and p.suffix == ".deb"]
        return keep_verified(
            files,
            final_dir,
            sha256,
            produced_by=f"apt-get download of {package}={version}",
            expected=".deb",
            by_hand=_by_hand(package, version),
        )


def extract_deb_members(deb: Path, members: Sequence[str], dest_root: Path) -> list[Path]:
    """Unpack ``deb`` and move ``members`` (paths inside it) to ``dest_root / member``.

    Members already in place are left alone (they can only be there complete).

    Raises:
        DataError: dpkg-deb is missing or failed, or the package has no such member.
    """
    wanted = [dest_root / PurePosixPath(m) for m in members]
    for member in members:
        if ".." in PurePosixPath(member).parts or PurePosixPath(member).is_absolute():
            raise DataError(f"{deb}: refusing to extract {member!r} (path leaves the cache)")
    if all(path.is_file() for path in wanted):
        return wanted
    dest_root.mkdir(parents=True, exist_ok=True)
    # The temporary folder sits next to the destination, so the final move is a rename
    # on one file system (atomic), never a copy that could be cut off half-way.
    with tempfile.TemporaryDirectory(dir=dest_root.parent, prefix=".extract-") as tmp:
        command = ["dpkg-deb", "-x", str(deb), tmp]
        try:
            _run_dpkg_deb(command)
        except (OSError, subprocess.CalledProcessError) as err:
            by_hand = shlex.join(["dpkg-deb", "-x", str(deb), str(dest_root)])
            raise DataError(
                f"could not unpack {deb.name} ({_failure(err, 'dpkg-deb')}); run by hand: {by_hand}"
            ) from None
        for member, path in zip(members, wanted, strict=True):
            if path.is_file():
                continue
            unpacked = Path(tmp) / PurePosixPath(member)
            if not unpacked.is_file():
                raise DataError(f"{deb}: no member {member!r}")
            path.parent.mkdir(parents=True, exist_ok=True)
            os.replace(unpacked, path)
    return wanted


def fetch_deb_members(
    package: str, version: str, members: Sequence[str], *, sha256: str
) -> list[Path]:
    """Fetch ``package=version`` (if needed) and return the cached paths of ``members``."""
    paths = [deb_member_path(package, version, m) for m in members]
    if all(path.is_file() for path in paths):
        return paths
    deb = fetch_deb(package, version, sha256=sha256)
    return extract_deb_members(deb, members, extracted_dir(package, version))
