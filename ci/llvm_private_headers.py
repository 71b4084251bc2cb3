#!/usr/bin/env python3
"""Fetch LLVM's private regalloc headers for the *installed* LLVM, at build time.

mlopt's regalloc eviction advisor subclasses LLVM's eviction-advisor classes,
whose headers LLVM 19 does not install (`lib/CodeGen/RegAllocEvictionAdvisor.h`,
`AllocationOrder.h`, `RegAllocScore.h`). They are taken from the Debian source
package of exactly the installed `libllvmN` (same source version), never from
mlopt's repository, and written with a VERSION stamp that the build embeds and a
test compares with `dpkg-query`:

    python3 ci/llvm_private_headers.py --major 19 --dest DIR   # prints DIR/<version>

The source package comes through apt only (python/mlopt/debian/apt_sources.py):
deb-src entries derived from the system's own apt configuration (added as root
when missing, and said so on stderr), `apt-get source --download-only`, which
verifies every file against apt's signed Sources index; then this script checks
again itself: the .dsc must have the SHA-256 of the signed index and each
tarball the one of the .dsc, else it refuses. `--sources DIR` (or
$MLOPT_LLVM_SOURCE_DIR) takes already downloaded files (.dsc and tarballs) and
checks them the same way. Only the three files are extracted from the orig
tarball, and the Debian patches touching them applied. The cache keeps their
SHA-256 (SHA256SUMS) and refuses a cached file that no longer matches.
Exit status 1 with a one-line reason when the sources cannot be had (not
Debian, no root to add deb-src entries, offline, other version, tampered file).
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

FILES = ("llvm/lib/CodeGen/RegAllocEvictionAdvisor.h", "llvm/lib/CodeGen/AllocationOrder.h",
         "llvm/lib/CodeGen/RegAllocScore.h")
APT_SOURCES = Path(__file__).resolve().parent.parent / "python" / "mlopt" / "debian" / "apt_sources.py"


class Unavailable(Exception):
    pass


def apt_sources():
    """mlopt.debian.apt_sources, loaded by path (mlopt is not installed yet at build time)."""
    spec = importlib.util.spec_from_file_location("mlopt_apt_sources", APT_SOURCES)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def installed_source(major: int) -> tuple[str, str]:
    """(source package, source version) of the installed libllvm<major>."""
    try:
        out = subprocess.run(["dpkg-query", "-W", "-f=${source:Package} ${source:Version}", f"libllvm{major}"],
                             capture_output=True, text=True, check=True).stdout.split()
    except (OSError, subprocess.CalledProcessError) as e:
        raise Unavailable(f"libllvm{major} is not a Debian package here ({e})") from None
    return out[0], out[1]


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def verified_sources(package: str, version: str, workdir: Path, given: Path | None) -> tuple[Path, Path | None]:
    """The orig and debian tarballs of ``package=version``, downloaded by apt
    into ``workdir`` (or taken from ``given``), each checked against the .dsc
    whose SHA-256 is the one of apt's signed Sources index."""
    apt = apt_sources()
    try:
        note = apt.ensure_deb_src()
        if note:
            print(f"llvm_private_headers: {note}", file=sys.stderr)
        index = apt.index_files(package, version)
        if given is None:
            apt.download_source(package, version, workdir, unpack=False)
            given = workdir
        files = apt.verify_source_files(given, index)
    except apt.AptSourceError as e:
        raise Unavailable(str(e)) from None
    origs = [p for n, p in files.items() if ".orig.tar." in n and ".asc" not in n and "orig-" not in n]
    debian = [p for n, p in files.items() if n.endswith(".debian.tar.xz")]
    if len(origs) != 1:
        raise Unavailable(f"{package}={version}: expected one orig tarball, the .dsc lists {len(origs)}")
    return origs[0], debian[0] if debian else None


def extract(orig: Path, debian: Path | None, dest: Path) -> None:
    wanted = {}
    with tarfile.open(orig, "r:*") as tar:
        for member in tar:
            rel = member.name.split("/", 1)[-1]
            if rel in FILES and member.isfile():
                wanted[rel] = tar.extractfile(member).read()
                if len(wanted) == len(FILES):
                    break
    missing = set(FILES) - set(wanted)
    if missing:
        raise Unavailable(f"{orig.name} lacks {', '.join(sorted(missing))}")
    for rel, data in wanted.items():
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        (dest / rel).write_bytes(data)
    if debian is None:
        return
    with tarfile.open(debian, "r:*") as tar:
        names = {m.name: m for m in tar if m.isfile()}
        series = names.get("debian/patches/series")
        if series is None:
            return
        for line in tar.extractfile(series).read().decode().splitlines():
            line = line.split("#", 1)[0].strip()
            member = names.get(f"debian/patches/{line.split()[0]}") if line else None
            if member is None:
                continue
            patch = tar.extractfile(member).read()
            if any(f.encode() in patch for f in FILES):
                subprocess.run(["patch", "-s", "-p1", "-d", str(dest), "-f"], input=patch, check=True,
                               stdout=subprocess.DEVNULL)


def cached(out: Path, version: str) -> bool:
    """True when ``out`` holds the headers of ``version`` whose SHA-256 match
    the recorded ones; False when there is no such cache (or one written
    before sums were recorded); Unavailable when a cached file was changed."""
    stamp, sums = out / "VERSION", out / "SHA256SUMS"
    if not (stamp.is_file() and stamp.read_text().strip() == version and sums.is_file()):
        return False
    recorded = dict(line.split("  ", 1)[::-1] for line in sums.read_text().splitlines() if "  " in line)
    for rel in FILES:
        path = out / rel
        if recorded.get(rel) is None or not path.is_file() or sha256(path) != recorded[rel]:
            raise Unavailable(f"cached {path} does not match its SHA-256 in {sums} (changed or corrupted; "
                              f"refusing it: remove {out} to fetch the sources again)")
    return True


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--major", type=int, required=True)
    ap.add_argument("--dest", type=Path, required=True, help="cache directory; the headers go to DEST/<version>")
    ap.add_argument("--sources", type=Path, default=os.environ.get("MLOPT_LLVM_SOURCE_DIR") or None,
                    help="a directory with the already downloaded .dsc and tarballs (checked like a download)")
    args = ap.parse_args()
    try:
        package, version = installed_source(args.major)
        out = args.dest / f"{package}_{version.replace(':', '_')}"
        if cached(out, version):
            print(out)
            return 0
        with tempfile.TemporaryDirectory() as tmp:
            orig, debian = verified_sources(package, version, Path(tmp), args.sources)
            args.dest.mkdir(parents=True, exist_ok=True)
            staging = Path(tempfile.mkdtemp(dir=args.dest, prefix=".staging-"))
            try:
                extract(orig, debian, staging)
                (staging / "SHA256SUMS").write_text("".join(f"{sha256(staging / f)}  {f}\n" for f in FILES))
                (staging / "SOURCE").write_text(f"{package} {version}: {orig.name}, {debian.name if debian else '-'}"
                                                " verified against apt's signed Sources index\n")
                (staging / "VERSION").write_text(version + "\n")
                if out.exists():
                    shutil.rmtree(out)
                staging.rename(out)
            finally:
                shutil.rmtree(staging, ignore_errors=True)
        print(out)
        return 0
    except (Unavailable, OSError, tarfile.TarError, subprocess.CalledProcessError) as e:
        print(f"llvm_private_headers: LLVM {args.major}: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
