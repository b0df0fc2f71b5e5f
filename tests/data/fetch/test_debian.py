"""The Debian download cache, with apt-get replaced by a local fake serving a real toy .deb."""

from __future__ import annotations

import hashlib
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from selfattn.data import DataError, DebianPackage, DebianSource, fetch_deb_members
from selfattn.data.fetch import cache, debian

PAYLOAD = b"Ein Satz. :: A sentence.\n" * 50
MEMBER = "usr/share/toy/de-en"
OTHER = "usr/share/toy/README"


@pytest.fixture(scope="module")
def toy_deb(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real .deb holding MEMBER and OTHER, built with dpkg-deb."""
    if shutil.which("dpkg-deb") is None:
        pytest.skip("needs dpkg-deb (Debian / Ubuntu)")
    root = tmp_path_factory.mktemp("toy")
    (root / "DEBIAN").mkdir()
    (root / "DEBIAN" / "control").write_text(
        "Package: toy\nVersion: 1.0-1\nArchitecture: all\n"
        "Maintainer: Nobody <nobody@example.org>\nDescription: test data\n"
    )
    (root / MEMBER).parent.mkdir(parents=True)
    (root / MEMBER).write_bytes(PAYLOAD)
    (root / OTHER).write_bytes(b"readme\n")
    deb = tmp_path_factory.mktemp("deb") / "toy_1.0-1_all.deb"
    subprocess.run(
        ["dpkg-deb", "--build", "--root-owner-group", str(root), str(deb)],
        check=True,
        capture_output=True,
    )
    return deb


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def fake_apt(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, toy_deb: Path
) -> list[tuple[list[str], Path]]:
    """Cache under tmp_path; "apt-get download" copies the toy .deb; returns the calls."""
    monkeypatch.setenv(cache.CACHE_ENV, str(tmp_path / "cache"))
    calls: list[tuple[list[str], Path]] = []

    def run(command: list[str], cwd: Path) -> None:
        calls.append((command, cwd))
        shutil.copy(toy_deb, cwd / toy_deb.name)

    monkeypatch.setattr(debian, "_run_apt", run)
    return calls


def leftovers(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.name.startswith(".")]


def test_fetch_verifies_extracts_and_caches(
    tmp_path: Path, toy_deb: Path, fake_apt: list[tuple[list[str], Path]]
) -> None:
    (path,) = fetch_deb_members("toy", "1.0-1", [MEMBER], sha256=sha(toy_deb))
    assert path.read_bytes() == PAYLOAD
    assert path == debian.deb_member_path("toy", "1.0-1", MEMBER)
    assert path.is_relative_to(tmp_path / "cache")
    command, cwd = fake_apt[0]
    assert command == ["apt-get", "download", "-q", "toy=1.0-1"]
    assert cwd.parent == tmp_path / "cache" / "debian"  # a temporary folder in the cache
    deb = debian.deb_dir("toy", "1.0-1") / toy_deb.name
    assert sha(deb) == sha(toy_deb)
    # Only the wanted member is kept; the rest of the package is not.
    assert not debian.deb_member_path("toy", "1.0-1", OTHER).exists()

    assert fetch_deb_members("toy", "1.0-1", [MEMBER], sha256=sha(toy_deb)) == [path]
    # Another member comes out of the cached .deb, with no new download.
    both = fetch_deb_members("toy", "1.0-1", [MEMBER, OTHER], sha256=sha(toy_deb))
    assert both[0] == path and both[1].read_bytes() == b"readme\n"
    deb.unlink()  # the extracted members alone are enough now
    assert fetch_deb_members("toy", "1.0-1", [MEMBER, OTHER], sha256=sha(toy_deb)) == both
    assert len(fake_apt) == 1
    assert leftovers(tmp_path / "cache") == []


def test_checksum_mismatch_is_an_error_and_caches_nothing(
    tmp_path: Path, fake_apt: list[tuple[list[str], Path]]
) -> None:
    with pytest.raises(DataError, match=r"checksum mismatch .* expected sha256 0000") as info:
        fetch_deb_members("toy", "1.0-1", [MEMBER], sha256="0" * 64)
    assert "apt-get download -q toy=1.0-1" in str(info.value)
    assert not list((tmp_path / "cache").rglob("*.deb"))
    assert not debian.deb_member_path("toy", "1.0-1", MEMBER).exists()


@pytest.mark.parametrize(
    ("error", "reason"),
    [
        (FileNotFoundError(2, "No such file or directory", "apt-get"), "apt-get not found"),
        (subprocess.CalledProcessError(100, ["apt-get"]), "apt-get exited with status 100"),
    ],
)
def test_download_failure_names_command_to_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, error: Exception, reason: str
) -> None:
    monkeypatch.setenv(cache.CACHE_ENV, str(tmp_path))

    def fail(command: list[str], cwd: Path) -> None:
        raise error

    monkeypatch.setattr(debian, "_run_apt", fail)
    with pytest.raises(DataError) as info:
        fetch_deb_members("trans-de-en", "1.9-6", ["usr/share/trans/de-en"], sha256="0" * 64)
    message = str(info.value)
    assert "\n" not in message and reason in message
    folder = shlex.quote(str(tmp_path / "debian" / "trans-de-en_1.9-6"))
    assert message.endswith(
        f"run by hand: mkdir -p {folder} && cd {folder} && apt-get download -q trans-de-en=1.9-6"
    )


def test_missing_dpkg_deb_names_command_to_run(
    toy_deb: Path, fake_apt: list[tuple[list[str], Path]], monkeypatch: pytest.MonkeyPatch
) -> None:
    def missing(command: list[str]) -> None:
        raise FileNotFoundError(2, "No such file or directory", "dpkg-deb")

    monkeypatch.setattr(debian, "_run_dpkg_deb", missing)
    with pytest.raises(DataError) as info:
        fetch_deb_members("toy", "1.0-1", [MEMBER], sha256=sha(toy_deb))
    message = str(info.value)
    deb = debian.deb_dir("toy", "1.0-1") / toy_deb.name
    by_hand = shlex.join(["dpkg-deb", "-x", str(deb), str(debian.extracted_dir("toy", "1.0-1"))])
    assert "\n" not in message and "dpkg-deb not found" in message
    assert message.endswith(f"run by hand: {by_hand}")
    assert not debian.deb_member_path("toy", "1.0-1", MEMBER).exists()
    assert leftovers(debian.deb_dir("toy", "1.0-1").parent.parent) == []


def test_missing_member_is_an_error(toy_deb: Path, fake_apt: list[tuple[list[str], Path]]) -> None:
    with pytest.raises(DataError, match="no member 'usr/share/toy/nope'"):
        fetch_deb_members("toy", "1.0-1", ["usr/share/toy/nope"], sha256=sha(toy_deb))
    with pytest.raises(DataError, match="leaves the cache"):
        fetch_deb_members("toy", "1.0-1", ["../../etc/passwd"], sha256=sha(toy_deb))


def test_hand_downloaded_deb_is_used(toy_deb: Path, fake_apt: list[tuple[list[str], Path]]) -> None:
    folder = debian.deb_dir("toy", "1.0-1")
    folder.mkdir(parents=True)
    shutil.copy(toy_deb, folder / "downloaded-by-hand.deb")
    (path,) = fetch_deb_members("toy", "1.0-1", [MEMBER], sha256=sha(toy_deb))
    assert path.read_bytes() == PAYLOAD and fake_apt == []


def test_debian_source_of_several_packages(
    toy_deb: Path, fake_apt: list[tuple[list[str], Path]]
) -> None:
    first = DebianPackage("toy", "1.0-1", sha(toy_deb), (MEMBER,), download_mb=0.1)
    second = DebianPackage("toy", "1.0-1", sha(toy_deb), (OTHER,), download_mb=0.2)
    source = DebianSource((first, second))
    assert source.origin() == "Debian toy=1.0-1 + toy=1.0-1"
    assert source.download_mb == pytest.approx(0.3)
    assert not source.is_fetched()
    paths = source.fetch()
    assert [p.read_bytes() for p in paths] == [PAYLOAD, b"readme\n"]
    assert source.is_fetched() and len(fake_apt) == 1


def test_a_download_of_no_deb_is_an_error_and_caches_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(cache.CACHE_ENV, str(tmp_path / "cache"))

    def run(command: list[str], cwd: Path) -> None:
        (cwd / "toy.txt").write_text("not a package")  # only .deb files count

    monkeypatch.setattr(debian, "_run_apt", run)
    with pytest.raises(DataError) as info:
        fetch_deb_members("toy", "1.0-1", [MEMBER], sha256="0" * 64)
    message = str(info.value)
    assert message.startswith("apt-get download of toy=1.0-1 produced nothing, expected one .deb")
    assert message.endswith("run by hand: " + debian._by_hand("toy", "1.0-1"))
    assert [p for p in (tmp_path / "cache").rglob("*") if p.is_file()] == []
