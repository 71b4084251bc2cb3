"""Debian source packages through apt, authenticated by apt's signed indices.

Where packages come from is apt's configuration, never mlopt's: the deb-src
entries mlopt needs are derived from the system's own ``deb`` entries (same
URIs, suites, components and ``Signed-By`` keyring), written once to
``/etc/apt/sources.list.d/mlopt-deb-src.sources``, and apt verifies every
download against the Release file signature and the Sources index hashes.
Entries marked ``trusted=yes`` (no signature check) are never copied.

This module uses only the standard library: ``ci/llvm_private_headers.py``
loads it by path at build time, before mlopt is installed.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

OUR_FILE = "mlopt-deb-src.sources"


class AptSourceError(Exception):
    """A source package cannot be had through apt (the message says why and what to do)."""


@dataclass(frozen=True)
class AptEntry:
    """One ``deb`` or ``deb-src`` line (or deb822 stanza, one suite per entry)."""

    kind: str  # "deb" or "deb-src"
    uri: str
    suite: str
    components: tuple[str, ...]
    options: tuple[tuple[str, str], ...] = field(default=())  # e.g. (("Signed-By", "/usr/share/keyrings/x.gpg"),)
    origin: str = ""  # the file it was read from

    @property
    def key(self) -> tuple[str, str]:
        return self.uri.rstrip("/"), self.suite

    def option(self, name: str) -> str | None:
        for k, v in self.options:
            if k.lower() == name.lower():
                return v
        return None

    @property
    def trusted_without_signature(self) -> bool:
        return (self.option("trusted") or "").lower() == "yes"


_ONE_LINE_OPTION = {"signed-by": "Signed-By", "arch": "Architectures", "trusted": "Trusted"}


def _parse_list(text: str, origin: str) -> list[AptEntry]:
    entries = []
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        options: list[tuple[str, str]] = []
        m = re.match(r"^(deb|deb-src)\s+\[([^\]]*)\]\s+(.*)$", line)
        if m:
            kind, opts, rest = m.groups()
            for opt in opts.split():
                if "=" in opt:
                    k, v = opt.split("=", 1)
                    options.append((_ONE_LINE_OPTION.get(k.lower(), k), v))
        else:
            parts = line.split(None, 1)
            if len(parts) != 2 or parts[0] not in ("deb", "deb-src"):
                continue
            kind, rest = parts
        words = rest.split()
        if len(words) < 2:
            continue
        entries.append(AptEntry(kind, words[0], words[1], tuple(words[2:]), tuple(options), origin))
    return entries


def _parse_deb822(text: str, origin: str) -> list[AptEntry]:
    entries = []
    for stanza in re.split(r"\n\s*\n", text):
        fields: dict[str, str] = {}
        last = None
        for raw in stanza.splitlines():
            if raw.startswith("#"):
                continue
            if raw[:1] in (" ", "\t") and last:
                fields[last] += "\n" + raw.strip()
                continue
            if ":" in raw:
                k, v = raw.split(":", 1)
                last = k.strip().lower()
                fields[last] = v.strip()
        if (fields.get("enabled", "yes").lower() == "no") or "types" not in fields:
            continue
        options = tuple((k.title() if k != "signed-by" else "Signed-By", v) for k, v in fields.items()
                        if k not in ("types", "uris", "suites", "components", "enabled"))
        for kind in fields["types"].split():
            for uri in fields.get("uris", "").split():
                for suite in fields.get("suites", "").split():
                    entries.append(AptEntry(kind, uri, suite, tuple(fields.get("components", "").split()),
                                            options, origin))
    return entries


def read_entries(etc_apt: str | os.PathLike = "/etc/apt") -> list[AptEntry]:
    """Every enabled entry of apt's configuration under ``etc_apt``."""
    etc = Path(etc_apt)
    entries: list[AptEntry] = []
    files = [etc / "sources.list"] + sorted((etc / "sources.list.d").glob("*"))
    for path in files:
        if not path.is_file():
            continue
        text = path.read_text(errors="replace")
        if path.suffix == ".list":
            entries += _parse_list(text, str(path))
        elif path.suffix == ".sources":
            entries += _parse_deb822(text, str(path))
    return entries


def missing_deb_src(entries: Iterable[AptEntry]) -> list[AptEntry]:
    """The ``deb-src`` entries apt lacks: one per signed ``deb`` entry
    (ignoring ``trusted=yes`` ones) whose URI and suite have no deb-src yet."""
    entries = list(entries)
    have = {e.key for e in entries if e.kind == "deb-src"}
    out, seen = [], set()
    for e in entries:
        if e.kind != "deb" or e.key in have or e.key in seen or e.trusted_without_signature:
            continue
        seen.add(e.key)
        options = tuple((k, v) for k, v in e.options if k.lower() not in ("architectures", "arch"))
        out.append(AptEntry("deb-src", e.uri, e.suite, e.components, options, e.origin))
    return out


def deb822(entries: Iterable[AptEntry]) -> str:
    """``entries`` as a deb822 ``.sources`` file, with where each came from."""
    stanzas = []
    for e in entries:
        lines = [f"# derived by mlopt from {e.origin}", f"Types: {e.kind}", f"URIs: {e.uri}", f"Suites: {e.suite}"]
        if e.components:
            lines.append("Components: " + " ".join(e.components))
        lines += [f"{k}: {v}" for k, v in e.options]
        stanzas.append("\n".join(lines))
    return "\n\n".join(stanzas) + "\n"


def _reason(output: str) -> str:
    """apt's errors (``E:`` lines) or else its last lines, on one line."""
    lines = [ln.strip() for ln in output.strip().splitlines() if ln.strip()]
    errors = [ln for ln in lines if ln.startswith("E:")]
    return "; ".join((errors or lines)[-3:]) or "no output"


def as_root(cmd: list[str]) -> list[str]:
    if os.geteuid() == 0:
        return cmd
    if shutil.which("sudo"):
        return ["sudo", "-n", *cmd]
    raise AptSourceError(f"{' '.join(cmd)} needs root (run it as root, or install sudo)")


def _run(cmd: list[str], what: str) -> str:
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, errors="replace")
    except OSError as e:
        raise AptSourceError(f"{what}: cannot run {cmd[0]}: {e.strerror}") from None
    if r.returncode != 0:
        tail = _reason(r.stderr or r.stdout)
        raise AptSourceError(f"{what}: {' '.join(cmd)} failed: {tail}")
    return r.stdout


def ensure_deb_src(etc_apt: str | os.PathLike = "/etc/apt") -> str | None:
    """Adds the missing deb-src entries (derived from the system's deb
    entries) and updates apt's indices. Returns what was done, for the user,
    or None when apt already had them."""
    if not shutil.which("apt-get"):
        raise AptSourceError("apt-get is not installed: Debian source packages need a Debian or Ubuntu system")
    entries = read_entries(etc_apt)
    missing = missing_deb_src(entries)
    if not missing:
        if not any(e.kind == "deb-src" for e in entries):
            raise AptSourceError(f"no signed deb entries in {etc_apt} to derive deb-src entries from")
        return None
    target = Path(etc_apt) / "sources.list.d" / OUR_FILE
    text = deb822(missing)
    if os.geteuid() == 0:
        target.write_text(text)
    else:
        subprocess.run(as_root(["tee", str(target)]), input=text, text=True, capture_output=True, check=False)
        if not target.exists():
            raise AptSourceError(f"cannot write {target} (needs root)")
    _run(as_root(["apt-get", "update", "-qq", "-o", "DPkg::Lock::Timeout=900"]), "updating apt's indices")
    suites = ", ".join(f"{e.uri} {e.suite}" for e in missing)
    return f"added deb-src entries to {target} (derived from the system's apt sources: {suites})"


@dataclass(frozen=True)
class SourceVersion:
    package: str
    version: str


def source_version(package: str, version: str | None = None) -> SourceVersion:
    """The source package ``package`` (or the source of binary ``package``)
    at ``version`` (default: the newest apt knows), from apt's indices."""
    out = _run(["apt-cache", "showsrc", "--only-source", package], f"looking up source package {package}")
    versions = re.findall(r"^Version: (\S+)$", out, re.M)
    if not versions:
        out = _run(["apt-cache", "showsrc", package], f"looking up source package {package}")
        names = re.findall(r"^Package: (\S+)$", out, re.M)
        if not names:
            raise AptSourceError(f"apt knows no source package {package!r} (is it in the configured suites?)")
        return source_version(names[0], version)
    if version is not None:
        if version not in versions:
            raise AptSourceError(f"apt has {package} {', '.join(versions)}, not {version}")
        return SourceVersion(package, version)
    newest = _newest(versions)
    return SourceVersion(package, newest)


def _newest(versions: list[str]) -> str:
    best = versions[0]
    for v in versions[1:]:
        r = subprocess.run(["dpkg", "--compare-versions", v, "gt", best], capture_output=True)
        if r.returncode == 0:
            best = v
    return best


def download_source(package: str, version: str, dest: str | os.PathLike, *, unpack: bool = True) -> Path:
    """``apt-get source`` of ``package=version`` into ``dest`` (created):
    apt checks every file against the signed Sources index; ``dpkg-source``
    unpacks and applies the Debian patches unless ``unpack`` is false.
    Returns the unpacked tree (or ``dest`` with ``unpack=False``)."""
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    cmd = ["apt-get", "source", "-qq"]
    if not unpack:
        cmd.append("--download-only")
    cmd.append(f"{package}={version}")
    try:
        r = subprocess.run(cmd, cwd=dest, capture_output=True, text=True, errors="replace")
    except OSError as e:
        raise AptSourceError(f"cannot run apt-get: {e.strerror}") from None
    if r.returncode != 0:
        tail = _reason(r.stderr or r.stdout)
        raise AptSourceError(f"apt-get source {package}={version} failed: {tail}")
    if not unpack:
        return dest
    upstream = version.split(":", 1)[-1].rsplit("-", 1)[0]
    tree = dest / f"{package}-{upstream}"
    if not tree.is_dir():
        dirs = [p for p in dest.iterdir() if p.is_dir() and p.name.startswith(package + "-")]
        if len(dirs) != 1:
            raise AptSourceError(f"apt-get source {package}={version}: no unpacked tree in {dest}")
        tree = dirs[0]
    return tree


@dataclass(frozen=True)
class IndexedFile:
    """One file of a source package as apt's signed Sources index lists it."""

    name: str
    size: int
    sha256: str


def index_files(package: str, version: str) -> dict[str, IndexedFile]:
    """The files (``.dsc`` and tarballs) of source package ``package=version``
    with the size and SHA-256 that apt's signed Sources index gives them
    (``apt-get source --print-uris``: nothing is downloaded)."""
    out = _run(["apt-get", "source", "-qq", "--print-uris", f"{package}={version}"],
               f"looking up {package}={version} in apt's Sources index")
    files = {}
    for m in re.finditer(r"^'[^']*' (\S+) (\d+) SHA256:([0-9a-f]{64})$", out, re.M):
        files[m.group(1)] = IndexedFile(m.group(1), int(m.group(2)), m.group(3))
    if not any(name.endswith(".dsc") for name in files):
        raise AptSourceError(f"apt's Sources index gives no SHA-256 .dsc for {package}={version}")
    return files


def file_sha256(path: Path) -> str:
    """The SHA-256 of a file's bytes, hex."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def dsc_checksums(dsc_text: str) -> dict[str, tuple[int, str]]:
    """``{file name: (size, sha256)}`` of a ``.dsc``'s Checksums-Sha256 field."""
    m = re.search(r"^Checksums-Sha256:[ \t]*\n((?:[ \t]+\S.*\n?)+)", dsc_text, re.M)
    if not m:
        return {}
    out = {}
    for line in m.group(1).splitlines():
        parts = line.split()
        if len(parts) == 3 and re.fullmatch(r"[0-9a-f]{64}", parts[0]) and parts[1].isdigit():
            out[parts[2]] = (int(parts[1]), parts[0])
    return out


def verify_source_files(directory: str | os.PathLike, index: dict[str, IndexedFile]) -> dict[str, Path]:
    """Checks the downloaded source package in ``directory`` against apt's
    signed index (``index_files``) and its ``.dsc``: the ``.dsc`` must have
    the index's SHA-256, every file it lists the ``.dsc``'s (and the
    index's) size and SHA-256. Returns ``{name: path}`` of the verified
    files; raises AptSourceError naming the first file that does not match."""
    directory = Path(directory)
    dscs = [f for f in index.values() if f.name.endswith(".dsc")]
    if len(dscs) != 1:
        raise AptSourceError(f"apt's index lists {len(dscs)} .dsc files, expected one")
    dsc = dscs[0]
    dsc_path = directory / dsc.name
    if not dsc_path.is_file():
        raise AptSourceError(f"{dsc_path} is missing")
    digest = file_sha256(dsc_path)
    if digest != dsc.sha256:
        raise AptSourceError(f"{dsc_path}: SHA-256 {digest} is not the {dsc.sha256} of apt's signed Sources index "
                             "(tampered or corrupted; refusing it)")
    listed = dsc_checksums(dsc_path.read_text(errors="replace"))
    if not listed:
        raise AptSourceError(f"{dsc_path} has no Checksums-Sha256 field")
    verified = {dsc.name: dsc_path}
    for name, (size, sha) in sorted(listed.items()):
        path = directory / name
        indexed = index.get(name)
        if indexed is not None and (indexed.size, indexed.sha256) != (size, sha):
            raise AptSourceError(f"{dsc_path} and apt's index disagree on {name} (refusing it)")
        if not path.is_file():
            raise AptSourceError(f"{path} is missing (listed in {dsc.name})")
        if path.stat().st_size != size or file_sha256(path) != sha:
            raise AptSourceError(f"{path}: size or SHA-256 is not the one {dsc.name} gives "
                                 "(tampered or corrupted; refusing it)")
        verified[name] = path
    return verified
