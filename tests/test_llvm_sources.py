"""LLVM's private headers come from apt-verified sources only, and
ci/llvm_private_headers.py refuses a tampered .dsc, tarball or cached header
(mlopt.debian.apt_sources.verify_source_files; the script itself)."""

from __future__ import annotations

import hashlib
import io
import subprocess
import sys
import tarfile
import urllib.request
from pathlib import Path

import pytest

from mlopt.debian import apt_sources
from mlopt.debian.apt_sources import AptSourceError, IndexedFile, verify_source_files

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "ci" / "llvm_private_headers.py"
FILES = ("llvm/lib/CodeGen/RegAllocEvictionAdvisor.h", "llvm/lib/CodeGen/AllocationOrder.h",
         "llvm/lib/CodeGen/RegAllocScore.h")


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _tar(members: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:xz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def fake_source_package(d: Path) -> dict[str, IndexedFile]:
    """A small source package (orig + debian tarballs, .dsc) and its index entries."""
    orig = _tar({f"llvm-toolchain-19_19.1.7/{f}": f"// {f}\n".encode() for f in FILES})
    debian = _tar({"debian/patches/series": b""})
    files = {"llvm-toolchain-19_19.1.7.orig.tar.xz": orig, "llvm-toolchain-19_19.1.7-3.debian.tar.xz": debian}
    dsc = "Format: 3.0 (quilt)\nSource: llvm-toolchain-19\nChecksums-Sha256:\n" + "".join(
        f" {_sha(data)} {len(data)} {name}\n" for name, data in files.items())
    files["llvm-toolchain-19_19.1.7-3.dsc"] = dsc.encode()
    for name, data in files.items():
        (d / name).write_bytes(data)
    return {name: IndexedFile(name, len(data), _sha(data)) for name, data in files.items()}


def test_untampered_sources_verify(tmp_path):
    index = fake_source_package(tmp_path)
    assert set(verify_source_files(tmp_path, index)) == set(index)


def test_a_tampered_dsc_is_refused(tmp_path):
    index = fake_source_package(tmp_path)
    dsc = tmp_path / "llvm-toolchain-19_19.1.7-3.dsc"
    # a .dsc that names a substituted tarball with its own (matching) checksum
    evil = _tar({"llvm-toolchain-19_19.1.7/x": b"evil"})
    (tmp_path / "llvm-toolchain-19_19.1.7.orig.tar.xz").write_bytes(evil)
    text = dsc.read_text().splitlines()
    text[3] = f" {_sha(evil)} {len(evil)} llvm-toolchain-19_19.1.7.orig.tar.xz"
    dsc.write_text("\n".join(text) + "\n")
    with pytest.raises(AptSourceError, match=r"\.dsc: SHA-256 [0-9a-f]{64} is not the [0-9a-f]{64} of apt's signed"):
        verify_source_files(tmp_path, index)


@pytest.mark.parametrize("name", ["llvm-toolchain-19_19.1.7.orig.tar.xz", "llvm-toolchain-19_19.1.7-3.debian.tar.xz"])
def test_a_tampered_tarball_is_refused(tmp_path, name):
    index = fake_source_package(tmp_path)
    data = bytearray((tmp_path / name).read_bytes())
    data[len(data) // 2] ^= 1
    (tmp_path / name).write_bytes(bytes(data))
    with pytest.raises(AptSourceError, match=rf"{name}: size or SHA-256 is not the one .*refusing it"):
        verify_source_files(tmp_path, index)


def test_a_missing_tarball_is_refused(tmp_path):
    index = fake_source_package(tmp_path)
    (tmp_path / "llvm-toolchain-19_19.1.7-3.debian.tar.xz").unlink()
    with pytest.raises(AptSourceError, match="debian.tar.xz is missing"):
        verify_source_files(tmp_path, index)


def test_no_archive_host_is_written_in_the_project():
    """Where packages come from is apt's configuration, never mlopt's files."""
    out = subprocess.run(["git", "grep", "-n", "-I", "-i", "-E", r"deb\.debian\.org|security\.debian\.org|"
                          r"archive\.ubuntu\.com|http://[a-z]", "--", ".", ":!tests/test_llvm_sources.py"],
                         cwd=ROOT, capture_output=True, text=True)
    if out.returncode not in (0, 1):
        pytest.skip("not a git checkout")
    assert out.stdout == ""


def _installed_llvm19() -> tuple[str, str]:
    r = subprocess.run(["dpkg-query", "-W", "-f=${source:Package} ${source:Version}", "libllvm19"],
                       capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip("libllvm19 is not a Debian package here")
    package, version = r.stdout.split()
    return package, version


def _script(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), "--major", "19", *map(str, args)],
                          capture_output=True, text=True, timeout=600)


@pytest.mark.llvm
def test_the_script_refuses_a_changed_cached_header(tmp_path):
    package, version = _installed_llvm19()
    out = tmp_path / f"{package}_{version.replace(':', '_')}"
    for f in FILES:
        (out / f).parent.mkdir(parents=True, exist_ok=True)
        (out / f).write_text(f"// {f}\n")
    (out / "SHA256SUMS").write_text("".join(f"{_sha((out / f).read_bytes())}  {f}\n" for f in FILES))
    (out / "VERSION").write_text(version + "\n")
    r = _script("--dest", tmp_path)
    assert (r.returncode, r.stdout.strip()) == (0, str(out))
    (out / FILES[1]).write_text("// changed\n")
    r = _script("--dest", tmp_path)
    assert r.returncode == 1 and r.stdout == ""
    assert r.stderr.startswith(f"llvm_private_headers: LLVM 19: cached {out / FILES[1]} does not match its SHA-256")
    assert r.stderr.count("\n") == 1 and f"remove {out}" in r.stderr


def _apt_index(package: str, version: str) -> dict[str, IndexedFile]:
    try:
        return apt_sources.index_files(package, version)
    except AptSourceError as e:
        pytest.skip(f"apt has no deb-src entries for LLVM 19 here (the build adds them as root): {e}")


@pytest.mark.llvm
def test_the_script_refuses_a_tampered_dsc_from_sources(tmp_path):
    package, version = _installed_llvm19()
    index = _apt_index(package, version)
    srcdir = tmp_path / "src"
    srcdir.mkdir()
    dsc = next(name for name in index if name.endswith(".dsc"))
    (srcdir / dsc).write_text("Format: 3.0 (quilt)\nChecksums-Sha256:\n")
    r = _script("--dest", tmp_path / "cache", "--sources", srcdir)
    assert r.returncode == 1 and r.stdout == ""
    assert f"{srcdir / dsc}: SHA-256 " in r.stderr and "refusing it" in r.stderr
    assert not (tmp_path / "cache").exists() or not any((tmp_path / "cache").iterdir())


@pytest.mark.llvm
@pytest.mark.network
def test_the_script_refuses_a_tampered_tarball_with_the_genuine_dsc(tmp_path):
    """The genuine .dsc (downloaded by apt, 8 KB) with a substituted orig tarball."""
    package, version = _installed_llvm19()
    index = _apt_index(package, version)
    srcdir = tmp_path / "src"
    srcdir.mkdir()
    dsc = next(name for name in index if name.endswith(".dsc"))
    uris = subprocess.run(["apt-get", "source", "-qq", "--print-uris", f"{package}={version}"],
                          capture_output=True, text=True, check=True).stdout
    uri = next(line.split("'")[1] for line in uris.splitlines() if line.split()[1] == dsc)
    with urllib.request.urlopen(uri, timeout=60) as f:  # the address apt's configuration gives
        (srcdir / dsc).write_bytes(f.read())
    for name in index:
        if name != dsc:
            (srcdir / name).write_bytes(b"not the tarball")
    r = _script("--dest", tmp_path / "cache", "--sources", srcdir)
    assert r.returncode == 1 and r.stdout == ""
    assert "size or SHA-256 is not the one" in r.stderr and "refusing it" in r.stderr
