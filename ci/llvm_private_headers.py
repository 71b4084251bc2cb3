#!/usr/bin/env python3
"""Fetch LLVM's private regalloc headers for the *installed* LLVM, at build time.

mlopt's regalloc eviction advisor subclasses LLVM's eviction-advisor classes,
whose headers LLVM 19 does not install (`lib/CodeGen/RegAllocEvictionAdvisor.h`,
`AllocationOrder.h`, `RegAllocScore.h`). They are taken from the Debian source
package of exactly the installed `libllvmN` (same source version), never from
mlopt's repository, and written with a VERSION stamp that the build embeds and a
test compares with `dpkg-query`:

    python3 ci/llvm_private_headers.py --major 19 --dest DIR   # prints DIR/<version>

The orig tarball comes from Debian's archive (its SHA-256 checked against the
.dsc), or from MLOPT_LLVM_SOURCE_TARBALL (an already downloaded orig.tar.xz).
Debian patches touching these files are applied. Exit status 1 with a one-line
reason when the sources cannot be had (not Debian, offline, other version).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import urllib.request
from pathlib import Path

FILES = ("llvm/lib/CodeGen/RegAllocEvictionAdvisor.h", "llvm/lib/CodeGen/AllocationOrder.h",
         "llvm/lib/CodeGen/RegAllocScore.h")
ARCHIVES = ("http://deb.debian.org/debian/pool/main", "http://deb.debian.org/debian-security/pool/updates/main")


class Unavailable(Exception):
    pass


def installed_source(major: int) -> tuple[str, str]:
    """(source package, source version) of the installed libllvm<major>."""
    try:
        out = subprocess.run(["dpkg-query", "-W", "-f=${source:Package} ${source:Version}", f"libllvm{major}"],
                             capture_output=True, text=True, check=True).stdout.split()
    except (OSError, subprocess.CalledProcessError) as e:
        raise Unavailable(f"libllvm{major} is not a Debian package here ({e})") from None
    return out[0], out[1]


def fetch(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=120) as r:
        return r.read()


def download(package: str, version: str, workdir: Path) -> tuple[Path, Path | None]:
    """The orig tarball (checked against the .dsc) and the debian tarball."""
    plain = version.split(":", 1)[-1]
    upstream = plain.rsplit("-", 1)[0]
    dsc_name = f"{package}_{plain}.dsc"
    local = os.environ.get("MLOPT_LLVM_SOURCE_TARBALL")
    for archive in ARCHIVES:
        base = f"{archive}/{package[0]}/{package}"
        try:
            dsc = fetch(f"{base}/{dsc_name}").decode()
        except OSError:
            continue
        section = dsc.split("Checksums-Sha256:", 1)[-1]
        sums = {name: sha for sha, name in re.findall(r"^ ([0-9a-f]{64}) \d+ (\S+)$", section, re.M)}
        orig = f"{package}_{upstream}.orig.tar.xz"
        deb = next((n for n in sums if n.endswith(".debian.tar.xz")), None)
        paths = {}
        for name in (orig, deb):
            if name is None:
                continue
            path = workdir / name
            if name == orig and local:
                path = Path(local)
            else:
                path.write_bytes(fetch(f"{base}/{name}"))
            digest = hashlib.sha256(path.read_bytes()).hexdigest()
            if digest != sums.get(name):
                raise Unavailable(f"{path}: SHA-256 {digest} does not match {dsc_name}")
            paths[name] = path
        return paths[orig], paths.get(deb) if deb else None
    raise Unavailable(f"{dsc_name} not found in Debian's archive")


def extract(orig: Path, debian: Path | None, dest: Path) -> None:
    wanted = {}
    with tarfile.open(orig, "r:xz") as tar:
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
    with tarfile.open(debian, "r:xz") as tar:
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


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--major", type=int, required=True)
    ap.add_argument("--dest", type=Path, required=True, help="cache directory; the headers go to DEST/<version>")
    args = ap.parse_args()
    try:
        package, version = installed_source(args.major)
        out = args.dest / f"{package}_{version.replace(':', '_')}"
        stamp = out / "VERSION"
        if stamp.is_file() and stamp.read_text().strip() == version:
            print(out)
            return 0
        with tempfile.TemporaryDirectory() as tmp:
            orig, debian = download(package, version, Path(tmp))
            args.dest.mkdir(parents=True, exist_ok=True)
            staging = Path(tempfile.mkdtemp(dir=args.dest, prefix=".staging-"))
            extract(orig, debian, staging)
            (staging / "VERSION").write_text(version + "\n")
            if out.exists():
                shutil.rmtree(out)
            staging.rename(out)
        print(out)
        return 0
    except (Unavailable, OSError, tarfile.TarError, subprocess.CalledProcessError) as e:
        print(f"llvm_private_headers: LLVM {args.major}: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
