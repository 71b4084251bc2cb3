"""``mlopt corpus debian``: a corpus from Debian source packages, each built
by its own build system (``dpkg-buildpackage``) with the chosen clang,
``-Oz`` and embedded bitcode, tests and docs off.

Per package, in its own working directory under the cache
(``<cache>/debian/<package>/<version>/<flags key>/``):

1. **fetch** ``apt-get source PKG=VERSION`` (apt checks every file against
   the signed Sources index; deb-src entries are derived from the system's
   apt sources when missing, :mod:`mlopt.debian.apt_sources`);
2. **build-dep** ``apt-get build-dep --arch-only -P nocheck,nodoc
   --no-remove`` (never removes an installed package);
3. **build** ``dpkg-buildpackage -B -uc -us`` with ``CC``/``CXX`` =
   ``clang-N``/``clang++-N``, ``DEB_CFLAGS_SET``/``DEB_CXXFLAGS_SET`` = the
   flags, ``DEB_BUILD_OPTIONS=nocheck nodoc noautodbgsym``, profiles
   ``nocheck nodoc``, Debian's own LTO off, ``dpkg-gensymbols`` reporting
   but not failing (``DPKG_GENSYMBOLS_CHECK_LEVEL=0``: the maintainers'
   symbols files were made with gcc); a time limit per package. With an LTO
   configuration or link flags, every link is lld's (``-fuse-ld=lld
   -Wl,--undefined-version``: lld refuses version scripts that name symbols
   a link does not define, GNU ld does not), ``-flto=MODE`` on compile and
   link. A package whose
   ``.install`` files list its man pages or manuals although ``nodoc``
   left them unbuilt (``dh_install: missing files``, only documentation
   missing) is built once more from a fresh tree after ``apt-get
   build-dep -P nocheck`` installed its documentation tools too, so
   whether it builds does not depend on what the machine had installed
   (tiff 4.5.0 and sphinx); its result says ``doc_build_deps``;
4. **extract** (an LTO build: what the links saved, :meth:`extract_lto`; or
   only the shipped binaries' ``.text``) every object of the build tree carrying ``.llvmbc`` and
   ``.llvmcmd`` (libtool's PIC object kept where it built two of one source;
   objects under test, example and benchmark directories left out), with
   its ``.text`` at the build's flags and its language; the ``.text`` of
   the ELF executables and shared libraries the package ships
   (``debian/<binary package>/``) is recorded too.

The result (``result.json``, the package's corpus, ``build.log``) is cached
by package, version and flags key, so a second run rebuilds nothing and an
interrupted run resumes; a package that failed keeps its reason (the last
lines of its log) and is retried only when asked. The build tree is
removed once extracted. :func:`debian_corpus` assembles the built packages
into one corpus (modules ``PKG/path/in/build``) with a manifest
(:mod:`.manifest`)."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import shutil
import signal
import struct
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from ..debian import apt_sources
from ..errors import CorpusError
from .elf import read_sections, text_bytes
from .extract import COMMAND_SECTION, ObjectRef, extract_corpus
from .fetch import cache_dir
from .layout import link_or_copy, prepare_output, safe_module_name, write_description
from .manifest import write_manifest

RESULT = "result.json"
# Directories whose objects are not what a package ships.
SKIPPED_DIRS = frozenset({"test", "tests", "testing", "testsuite", "unittest", "unittests", "gtest", "googletest",
                          "example", "examples", "bench", "benchmark", "benchmarks", "fuzz", "fuzzing", "doc",
                          "docs"})
CXX_SUFFIXES = frozenset({".cc", ".cpp", ".cxx", ".c++", ".C", ".cp", ".CPP", ".ii", ".hpp", ".hh"})
SYSTEM_PATH = ("/usr/sbin", "/usr/bin", "/sbin", "/bin")
GCC_VERSIONS = ("10", "11", "12", "13", "14")  # gcc-N names a build may use
LIST_FILE = Path(__file__).with_name("debian_packages.txt")


@dataclass(frozen=True)
class DebianConfig:
    """How packages are built. ``extra_flags`` (e.g. a policy's plugin
    flags) enter the flags key, so such builds are cached apart."""

    llvm: int = 19
    flags: tuple[str, ...] = ("-Oz",)
    extra_flags: tuple[str, ...] = ()
    # Link-time: lld's LTO ("full", "thin") or none, and flags for every link
    # (-fuse-ld=lld and -flto=MODE come with them). An LTO build's objects are
    # bitcode: its result is the shipped binaries' .text, no modules.
    lto: str | None = None
    link_flags: tuple[str, ...] = ()
    lld: bool = False  # link with lld even without LTO or link flags
    # With lto: every link saves its LTO modules through the plugin
    # (-mlopt-save-lto-modules) and lld its objects (--save-temps=prelink):
    # the package's LTO corpus, each module with the .text of lld's object.
    save_lto_modules: bool = False
    jobs: int = 1  # packages built at once
    timeout: float = 1800.0  # seconds per package build
    retry_failed: bool = False
    keep_tree: bool = False

    @property
    def cflags(self) -> str:
        if self.lto is not None:
            return " ".join([*self.flags, f"-flto={self.lto}", *self.extra_flags])
        return " ".join([*self.flags, "-Xclang", "-fembed-bitcode=all", *self.extra_flags])

    @property
    def ldflags(self) -> str:
        """Appended to the build's LDFLAGS; empty: the build links as it would."""
        if self.lto is None and not self.link_flags and not self.lld:
            return ""
        # lld (17+) refuses a version script naming a symbol the link does not
        # define; GNU ld, which the packages' scripts were written for, does not.
        return " ".join(["-fuse-ld=lld", "-Wl,--undefined-version", *([f"-flto={self.lto}"] if self.lto else []),
                         *self.link_flags])

    def compiler_version(self) -> str:
        try:
            out = subprocess.run([f"clang-{self.llvm}", "--version"], capture_output=True, text=True).stdout
        except OSError:
            raise CorpusError(f"clang-{self.llvm} is not installed (apt-get install clang-{self.llvm})") from None
        return out.splitlines()[0].strip() if out else f"clang-{self.llvm}"

    def key(self) -> str:
        text = json.dumps([self.compiler_version(), self.cflags, "v2",  # v2: .text counts .text.* COMDAT sections
                           *([self.ldflags] if self.ldflags else []),
                           *(["lto-modules"] if self.save_lto_modules else [])])
        return hashlib.sha256(text.encode()).hexdigest()[:12]


@dataclass(frozen=True)
class PackageSpec:
    name: str
    version: str | None = None  # None: the newest apt knows
    why: str = ""
    domain: str = ""


@dataclass
class PackageResult:
    name: str
    version: str
    status: str  # "built" | "failed"
    stage: str = ""  # fetch | build-dep | build | extract, where it failed
    reason: str = ""
    source_sha256: str = ""
    modules: list[str] = field(default_factory=list)
    module_text: dict[str, int] = field(default_factory=dict)
    module_language: dict[str, str] = field(default_factory=dict)
    shipped: dict[str, int] = field(default_factory=dict)  # ELF file -> .text
    build_seconds: float = 0.0  # wall time of fetch + build + extract
    cpu_seconds: float = 0.0  # CPU time of the build's processes
    doc_build_deps: bool = False  # built on the second try, with the documentation's build dependencies
    cached: bool = False
    workdir: str = ""

    def to_json(self) -> dict:
        d = dict(self.__dict__)
        d.pop("cached")
        return d

    @classmethod
    def from_json(cls, d: dict) -> PackageResult:
        return cls(**{k: v for k, v in d.items() if k in cls.__dataclass_fields__})

    def manifest_entry(self, spec: PackageSpec | None = None) -> dict:
        entry: dict = {"name": self.name, "version": self.version, "status": self.status}
        if spec is not None and spec.domain:
            entry["domain"] = spec.domain
        if self.status != "built":
            return {**entry, "stage": self.stage, "reason": self.reason}
        langs: dict[str, dict[str, int]] = {}
        for m in self.modules:
            t = langs.setdefault(self.module_language.get(m, "c"), {"modules": 0, "text": 0})
            t["modules"] += 1
            t["text"] += self.module_text.get(m, 0)
        return {**entry, "source_sha256": self.source_sha256, "modules": len(self.modules),
                "text": sum(self.module_text.get(m, 0) for m in self.modules), "languages": langs,
                "shipped_text": sum(self.shipped.values()), "build_seconds": round(self.build_seconds, 1),
                "cpu_seconds": round(self.cpu_seconds, 1), **({"doc_build_deps": True} if self.doc_build_deps else {})}


def read_package_list(path: str | os.PathLike = LIST_FILE) -> list[PackageSpec]:
    """A package list: ``name[=version]  # domain: why`` per line."""
    specs = []
    for n, raw in enumerate(Path(path).read_text().splitlines(), 1):
        line, _, comment = raw.partition("#")
        line = line.strip()
        if not line:
            continue
        if not re.fullmatch(r"[a-z0-9][a-z0-9+.-]*(=[A-Za-z0-9.+~:-]+)?", line):
            raise CorpusError(f"{path}:{n}: expected 'package[=version]  # domain: why', not {raw.strip()!r}")
        name, _, version = line.partition("=")
        domain, _, why = comment.partition(":")
        specs.append(PackageSpec(name, version or None, why.strip(), domain.strip()))
    return specs


def parse_package_args(args: Sequence[str]) -> list[PackageSpec]:
    specs = []
    for a in args:
        name, _, version = a.partition("=")
        if not re.fullmatch(r"[a-z0-9][a-z0-9+.-]*", name):
            raise CorpusError(f"{a!r} is not a Debian source package name")
        specs.append(PackageSpec(name, version or None))
    return specs


def _tail(text: str, lines: int = 12) -> str:
    kept = [ln for ln in text.strip().splitlines() if ln.strip()]
    return "\n".join(kept[-lines:])


_ERROR_LINE = re.compile(r"\b(error|Error|ERROR)\b(?!=)|cannot|not found|undefined reference")
_NOT_AN_ERROR = re.compile(r"-Werror|CMAKE_ERROR|checking |error\.h|strerror|\berror_")


def build_failure(log: str, first: int = 4, last: int = 4) -> str:
    """A failed build's reason: its first error lines and its last lines."""
    lines = [ln.rstrip() for ln in log.splitlines() if ln.strip()]
    tail = lines[-last:]
    body = lines[:-last] if len(lines) > last else []
    errors = [ln for ln in body if _ERROR_LINE.search(ln) and not _NOT_AN_ERROR.search(ln)][:first]
    return "\n".join([*(ln[:400] for ln in errors), *(["..."] if errors and tail else []),
                      *(ln[:400] for ln in tail)])


_MISSING = re.compile(r"^dh_install: warning: \S+ missing files: (.+)$", re.M)
_DOC_FILE = re.compile(r"(^|/)(man|doc|info|html|gtk-doc|devhelp)(/|$)|\.(html|pdf|info)(\.gz)?$")


def missing_doc_files(log: str) -> list[str]:
    """What a failed build's ``dh_install`` could not find, when that is
    what failed it and every missing file is documentation (man pages,
    manuals, HTML, info): the mark of a ``.install`` that lists what the
    ``nodoc`` profile did not build. ``[]`` otherwise."""
    if "dh_install: error: missing files, aborting" not in log:
        return []
    files = [f for m in _MISSING.finditer(log) for f in m.group(1).split()]
    return files if files and all(_DOC_FILE.search(f) for f in files) else []


def _elf_type(path: Path) -> int | None:
    try:
        with open(path, "rb") as f:
            head = f.read(18)
    except OSError:
        return None
    if len(head) < 18 or head[:4] != b"\x7fELF":
        return None
    return struct.unpack_from("<H" if head[5] == 1 else ">H", head, 16)[0]


def language_of(command: bytes) -> str:
    """``c`` or ``c++`` from a ``.llvmcmd`` (the main file's suffix, or
    C++ options)."""
    args = command.decode("utf-8", "surrogateescape").split("\0")
    for i, a in enumerate(args[:-1]):
        if a == "-main-file-name":
            if Path(args[i + 1]).suffix in CXX_SUFFIXES:
                return "c++"
            break
    if any(a.startswith("-std=c++") or a.startswith("-std=gnu++") or a == "-fcxx-exceptions" for a in args):
        return "c++"
    return "c"


class PackageBuilder:
    """Fetches, builds and extracts one package in its working directory
    (``prepare`` takes apt's lock and runs one at a time; ``build`` may run
    in parallel)."""

    def __init__(self, spec: PackageSpec, config: DebianConfig, cache: Path, key: str):
        self.spec, self.config = spec, config
        self.version = spec.version or ""
        self.root = cache / "debian" / spec.name
        self.key = key
        self.source_sha256 = ""
        self.cpu_seconds = 0.0
        self.doc_build_deps = False
        self.prepare_seconds = 0.0

    @property
    def workdir(self) -> Path:
        safe = re.sub(r"[^A-Za-z0-9.+~-]", "_", self.version)
        return self.root / safe / self.key

    def cached(self) -> PackageResult | None:
        path = self.workdir / RESULT
        if not self.version or not path.exists():
            return None
        try:
            result = PackageResult.from_json(json.loads(path.read_text()))
        except (OSError, ValueError, TypeError):
            return None
        if result.status == "built" and result.modules and \
                not (self.workdir / "corpus" / "corpus_description.json").exists():
            return None
        if result.status != "built" and self.config.retry_failed:
            return None
        result.cached = True
        return result

    def lock(self):
        """An exclusive lock on the working directory (released on close)."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        f = open(self.workdir / ".lock", "w")
        fcntl.flock(f, fcntl.LOCK_EX)
        return f

    def failed(self, stage: str, reason: str, started: float) -> PackageResult:
        result = PackageResult(self.spec.name, self.version, "failed", stage, reason,
                               build_seconds=time.monotonic() - started, cpu_seconds=self.cpu_seconds,
                               workdir=str(self.workdir))
        self._save(result)
        return result

    def _save(self, result: PackageResult) -> None:
        if not self.version:
            return
        self.workdir.mkdir(parents=True, exist_ok=True)
        tmp = self.workdir / (RESULT + ".partial")
        tmp.write_text(json.dumps(result.to_json(), indent=1) + "\n")
        os.replace(tmp, self.workdir / RESULT)

    def resolve(self) -> None:
        if not self.version:
            self.version = apt_sources.source_version(self.spec.name).version
        else:
            apt_sources.source_version(self.spec.name, self.version)

    def prepare(self) -> Path:
        """Source tree (fetched, verified by apt) with build dependencies
        installed (they bring dpkg-dev, which unpacks the source)."""
        src = self.workdir / "src"
        shutil.rmtree(src, ignore_errors=True)
        apt_sources.download_source(self.spec.name, self.version, src, unpack=False)
        dsc = sorted(src.glob("*.dsc"))
        if len(dsc) != 1:
            raise _StageError("fetch", f"apt-get source gave {len(dsc)} .dsc files in {src}")
        self.source_sha256 = apt_sources.file_sha256(dsc[0])
        self.install_build_deps("nocheck,nodoc")
        return self.unpack()

    def install_build_deps(self, profiles: str) -> None:
        cmd = ["apt-get", "build-dep", "-y", "-qq", "--no-remove", "-o", "DPkg::Lock::Timeout=900", "--arch-only",
               "-P", profiles, f"{self.spec.name}={self.version}"]
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        r = subprocess.run(apt_sources.as_root(cmd), capture_output=True, text=True, errors="replace", env=env)
        if r.returncode != 0:
            raise _StageError("build-dep", _tail(r.stderr or r.stdout, 6))

    def unpack(self) -> Path:
        """A fresh source tree ``src/tree`` from the fetched ``.dsc``."""
        src = self.workdir / "src"
        dsc = sorted(src.glob("*.dsc"))
        tree = src / "tree"
        shutil.rmtree(tree, ignore_errors=True)
        r = subprocess.run(["dpkg-source", "-x", dsc[0].name, "tree"], cwd=src, capture_output=True, text=True,
                           errors="replace")
        if r.returncode != 0 or not tree.is_dir():
            raise _StageError("fetch", "dpkg-source -x: " + _tail(r.stderr or r.stdout, 4))
        return tree

    def build_with_docs_if_needed(self, tree: Path) -> Path:
        """:meth:`build`; when only documentation was missing, once more
        from a fresh tree with the documentation's build dependencies.
        Returns the tree that built."""
        try:
            self.build(tree)
            return tree
        except CorpusError as e:
            log = self.workdir / "build.log"
            if getattr(e, "stage", "") != "build" or not missing_doc_files(log.read_text(errors="replace")):
                raise
            os.replace(log, self.workdir / "build-nodoc.log")
        self.install_build_deps("nocheck")
        self.doc_build_deps = True
        tree = self.unpack()
        self.build(tree)
        return tree

    def compiler_shims(self) -> Path:
        """A directory of ``gcc``/``g++``/``cc``/``c++`` (and triplet-named)
        commands that run clang: builds that name gcc get clang too."""
        bin_dir = self.workdir / "bin"
        bin_dir.mkdir(parents=True, exist_ok=True)
        triplet = "x86_64-linux-gnu"
        with contextlib.suppress(OSError):
            triplet = subprocess.run(["dpkg-architecture", "-qDEB_HOST_MULTIARCH"], capture_output=True,
                                     text=True).stdout.strip() or triplet
        major = self.config.llvm
        for names, tool in ((("gcc", "cc"), f"clang-{major}"), (("g++", "c++"), f"clang++-{major}")):
            for name in names:
                for full in (name, f"{triplet}-{name}", *(f"{p}-{v}" for p in (name, f"{triplet}-{name}")
                                                        for v in GCC_VERSIONS)):
                    _shim(bin_dir / full, tool)
        # binutils' ar/nm/ranlib load every LLVMgold plugin in bfd-plugins/, which
        # read the embedded .llvmbc (of another LLVM version, too) instead of the
        # object's symbols: static archives lose their index. LLVM's own tools read
        # the ELF symbols.
        for name in ("ar", "nm", "ranlib"):
            for full in (name, f"{triplet}-{name}", f"gcc-{name}", f"{triplet}-gcc-{name}"):
                _shim(bin_dir / full, f"llvm-{name}-{major}")
        return bin_dir

    def build(self, tree: Path) -> Path:
        cc, cxx = f"clang-{self.config.llvm}", f"clang++-{self.config.llvm}"
        flags = self.config.cflags
        # Debian's own tools (the build dependencies apt installed), not a
        # user's newer cmake or python earlier on PATH.
        path = os.pathsep.join([str(self.compiler_shims()), *SYSTEM_PATH])
        env = {**os.environ, "PATH": path, "CC": cc, "CXX": cxx, "DEB_CFLAGS_SET": flags, "DEB_CXXFLAGS_SET": flags,
               "DEB_OBJCFLAGS_SET": flags, "DEB_OBJCXXFLAGS_SET": flags,
               "DEB_BUILD_OPTIONS": "nocheck nodoc nostrip noautodbgsym noddebs parallel=1",
               "DEB_BUILD_PROFILES": "nocheck nodoc", "DEB_BUILD_MAINT_OPTIONS": "optimize=-lto",
               "LC_ALL": "C.UTF-8", "DEBIAN_FRONTEND": "noninteractive",
               # dpkg-gensymbols compares the exported symbols with the symbols file the maintainer made with gcc:
               # a packaging check that says nothing about the code (clang exports other inline and template
               # instantiations), reported but not fatal
               "DPKG_GENSYMBOLS_CHECK_LEVEL": "0"}
        if self.config.ldflags:
            env["DEB_LDFLAGS_APPEND"] = " ".join([self.config.ldflags, *self.lto_module_flags()])
        log = self.workdir / "build.log"
        with open(log, "wb") as out:
            proc = subprocess.Popen(["dpkg-buildpackage", "-B", "-uc", "-us", "--no-sign"], cwd=tree, env=env,
                                    stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    start_new_session=True)
            timed_out = threading.Event()

            def kill() -> None:
                timed_out.set()
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)

            timer = threading.Timer(self.config.timeout, kill)
            timer.start()
            try:  # wait4: the build's own CPU time (its process tree), whatever else runs beside it
                _, status, usage = os.wait4(proc.pid, 0)
            finally:
                timer.cancel()
            proc.returncode = rc = os.waitstatus_to_exitcode(status)
            self.cpu_seconds += usage.ru_utime + usage.ru_stime
            if timed_out.is_set():
                raise _StageError("build", f"no result after {self.config.timeout:.0f} s (time limit)")
        if rc != 0:
            raise _StageError("build", build_failure(log.read_text(errors="replace")))
        return log

    def lto_module_flags(self) -> list[str]:
        """The link flags that save the LTO corpus (see DebianConfig.save_lto_modules)."""
        if not (self.config.save_lto_modules and self.config.lto):
            return []
        from .. import _native

        plugin = _native.plugin_library(self.config.llvm)
        if plugin is None:
            raise _StageError("build", f"mlopt was built without LLVM {self.config.llvm}'s plugin: no LTO corpus")
        saved = self.workdir / "lto-modules"
        shutil.rmtree(saved, ignore_errors=True)
        return [f"-Wl,-mllvm,-load={plugin}", f"-Wl,-mllvm,-mlopt-save-lto-modules={saved}",
                f"-Wl,--load-pass-plugin={plugin}", "-Wl,--save-temps=prelink"]

    def extract_lto(self, tree: Path) -> tuple[list[str], dict[str, int], dict[str, str]]:
        """The package's LTO corpus from the modules its links saved: each
        module with the .text of the object lld made of it (``lld_text`` in
        its link facts too) and its language."""
        from .lto import FACTS, extract_lto_corpus, native_object_of

        corpus = self.workdir / "corpus"
        try:
            report = extract_lto_corpus(self.workdir / "lto-modules", corpus, lto=self.config.lto, root=tree,
                                        force=True)
        except CorpusError as e:
            raise _StageError("extract", str(e)) from None
        text, lang = {}, {}
        kept = []
        for m in report.modules:
            facts_path = corpus / f"{m}{FACTS}"
            facts = json.loads(facts_path.read_text())
            binary = Path(facts["output_path"])
            if not binary.is_file():  # a configure or CMake check's link, removed since: not what it ships
                for suffix in (".bc", FACTS):
                    (corpus / f"{m}{suffix}").unlink()
                continue
            native = native_object_of(facts)
            if native is None or not native.is_file():
                raise _StageError("extract", f"{m}: lld left no object of it (--save-temps=prelink)")
            kept.append(m)
            text[m] = facts["lld_text"] = text_bytes(read_sections(native))
            facts["binary_text"] = text_bytes(read_sections(binary))
            facts_path.unlink()  # a link to the saved file: write the corpus's own
            facts_path.write_text(json.dumps(facts, indent=2) + "\n")
            source = facts.get("source", "")
            if facts["lto"] == "thin":
                lang[m] = "c++" if Path(source).suffix in CXX_SUFFIXES else "c"
            else:
                dynstr = read_sections(binary, {".dynstr"}).get(".dynstr", b"")
                lang[m] = "c++" if b"libstdc++.so" in dynstr else "c"
        shutil.rmtree(self.workdir / "lto-modules", ignore_errors=True)
        if not kept:
            raise _StageError("extract", "no LTO module of a binary the build kept")
        from .lto import write_lto_description

        write_lto_description(corpus, self.config.lto, kept)
        return kept, text, lang

    def extract(self, tree: Path) -> tuple[list[str], dict[str, int], dict[str, str], dict[str, int]]:
        if self.config.lto is not None:  # bitcode objects: what it ships is the result
            shipped = _shipped_text(tree)
            if not shipped:
                raise _StageError("extract", "the build ships no ELF executable or shared library")
            if self.config.save_lto_modules:
                return (*self.extract_lto(tree), shipped)
            return [], {}, {}, shipped
        objects = _package_objects(tree)
        corpus = self.workdir / "corpus"
        shutil.rmtree(corpus, ignore_errors=True)
        report = extract_corpus(objects, corpus, threads=1, force=True)
        if not report.modules:
            reasons = {s["reason"] for s in report.skipped}
            raise _StageError("extract", f"no object of the build carries embedded bitcode ({len(objects)} objects"
                              + (f"; {sorted(reasons)[0]}" if reasons else "") + "): does the build ignore CC/CFLAGS?")
        by_name = {r.name: r.path for r in objects}
        text, lang = {}, {}
        for m in report.modules:
            s = read_sections(by_name[m])
            text[m] = text_bytes(s)
            lang[m] = language_of(s.get(COMMAND_SECTION, b""))
        return report.modules, text, lang, _shipped_text(tree)

    def run_build(self, tree: Path, started: float) -> PackageResult:
        try:
            modules, text, lang, shipped = self.extract(self.build_with_docs_if_needed(tree))
        except (OSError, CorpusError) as e:
            return self.failed(getattr(e, "stage", "extract"), getattr(e, "reason", str(e)), started)
        finally:
            if not self.config.keep_tree:
                shutil.rmtree(self.workdir / "src", ignore_errors=True)
        result = PackageResult(self.spec.name, self.version, "built", source_sha256=self.source_sha256,
                               modules=modules, module_text=text, module_language=lang, shipped=shipped,
                               build_seconds=time.monotonic() - started, cpu_seconds=self.cpu_seconds,
                               doc_build_deps=self.doc_build_deps, workdir=str(self.workdir))
        self._save(result)
        return result


def _StageError(stage: str, reason: str) -> CorpusError:  # noqa: N802 - raised like a class
    """A package's failure at ``stage`` (fetch, build-dep, build, extract)."""
    e = CorpusError(reason)
    e.stage, e.reason = stage, reason
    return e


def _shim(path: Path, tool: str) -> None:
    path.write_text(f'#!/bin/sh\nexec {tool} "$@"\n')
    path.chmod(0o755)


_TEST_FILE = re.compile(r"(^|[_-])(test|tests|unittest|unittests|benchmark|bench|fuzzer)([_.-]|$)", re.I)


def shipped_module(name: str) -> bool:
    """False for objects of tests, examples, benchmarks and fuzzers (by
    directory or file name): not what a package ships."""
    parts = name.split("/")
    return (not any(part.lower() in SKIPPED_DIRS for part in parts[:-1])
            and not _TEST_FILE.search(parts[-1].split(".", 1)[0]))


def _skipped(rel: Path) -> bool:
    # Out-of-tree builds under debian/ (debian/build, debian/normal-build) count.
    return rel.parts[:2] == ("debian", "tmp") or not shipped_module(rel.as_posix())


def _package_objects(tree: Path) -> list[ObjectRef]:
    """The build's objects, named by their path in the tree; of libtool's
    pair (``x.o`` and ``.libs/x.o``) the PIC one under ``.libs`` is kept."""
    found: dict[str, ObjectRef] = {}
    for path in sorted(tree.rglob("*.o")):
        if not path.is_file() or path.is_symlink():
            continue
        rel = path.relative_to(tree)
        if _skipped(rel):
            continue
        parts = [p for p in rel.parts if p != ".libs"]
        name = safe_module_name("/".join(parts))
        if name in found and ".libs" not in rel.parts:
            continue
        found[name] = ObjectRef(path, name)
    return list(found.values())


def _shipped_text(tree: Path) -> dict[str, int]:
    """``.text`` of every ELF executable and shared library in the binary
    packages' staging directories (``debian/<package>/``, not ``debian/tmp``)."""
    out = {}
    debian = tree / "debian"
    staged = [p for p in sorted(debian.iterdir()) if p.is_dir() and (p / "DEBIAN").is_dir()]
    for pkg_dir in staged:
        for path in sorted(pkg_dir.rglob("*")):
            if path.is_symlink() or not path.is_file() or _elf_type(path) not in (2, 3):  # ET_EXEC, ET_DYN
                continue
            try:
                out[str(path.relative_to(debian))] = text_bytes(read_sections(path))
            except (OSError, CorpusError):
                continue
    return out


ProgressFn = Callable[[str, str, int, int], None]  # (event, package, done, total)


def build_packages(specs: Sequence[PackageSpec], config: DebianConfig = DebianConfig(), *,
                   cache: Path | None = None, on_progress: ProgressFn | None = None,
                   say: Callable[[str], None] | None = None) -> list[PackageResult]:
    """Builds (or takes from the cache) every package; never raises for one
    package's failure: its result says why. Fetching and installing build
    dependencies take apt's lock and run in turn, builds run ``config.jobs``
    at a time."""
    cache = cache or cache_dir()
    key = config.key()
    try:
        note = apt_sources.ensure_deb_src()
    except apt_sources.AptSourceError as e:
        raise CorpusError(f"Debian source packages: {e}") from None
    if note and say:
        say(note)
    results: dict[int, PackageResult] = {}
    total, done = len(specs), 0
    lock = threading.Lock()

    def finished(i: int, result: PackageResult) -> None:
        nonlocal done
        with lock:
            results[i] = result
            done += 1
            if on_progress:
                on_progress("cached" if result.cached else result.status, result.name, done, total)

    futures: list[Future] = []
    with ThreadPoolExecutor(max_workers=max(1, config.jobs)) as pool:
        for i, spec in enumerate(specs):
            builder = PackageBuilder(spec, config, cache, key)
            started = time.monotonic()
            try:
                builder.resolve()
            except apt_sources.AptSourceError as e:
                finished(i, PackageResult(spec.name, spec.version or "", "failed", "fetch", str(e)))
                continue
            hit = builder.cached()
            if hit is not None:
                finished(i, hit)
                continue
            held = builder.lock()  # another mlopt building this package: wait for it, then take its result
            hit = builder.cached()
            if hit is not None:
                held.close()
                finished(i, hit)
                continue
            if on_progress:
                on_progress("fetch", spec.name, done, total)
            try:
                tree = builder.prepare()
            except (CorpusError, apt_sources.AptSourceError) as e:
                stage, reason = getattr(e, "stage", "fetch"), getattr(e, "reason", str(e))
                finished(i, builder.failed(stage, reason, started))
                held.close()
                continue

            builder.prepare_seconds = time.monotonic() - started

            def work(b=builder, t=tree, i=i, held=held):  # timed from when it starts, not from when it was queued
                start = time.monotonic() - b.prepare_seconds
                try:
                    result = b.run_build(t, start)
                except Exception as e:  # noqa: BLE001 - one package's surprise must not end the others' builds
                    result = b.failed("extract", f"{type(e).__name__}: {e}", start)
                finally:
                    held.close()
                finished(i, result)

            futures.append(pool.submit(work))
        for f in futures:
            f.result()
    return [results[i] for i in range(total)]


def debian_corpus(specs: Sequence[PackageSpec], output: str | os.PathLike, config: DebianConfig = DebianConfig(), *,
                  exclude: Sequence[str] = (), cache: Path | None = None, force: bool = False,
                  on_progress: ProgressFn | None = None, say: Callable[[str], None] | None = None) -> dict:
    """Builds the packages (less ``exclude``) and writes one corpus of every
    built package's modules (``PKG/path``) with its manifest; returns the
    manifest."""
    excluded = sorted(set(exclude))
    unknown = [e for e in excluded if not re.fullmatch(r"[a-z0-9][a-z0-9+.-]*", e)]
    if unknown:
        raise CorpusError(f"--exclude {unknown[0]!r} is not a package name")
    chosen = [s for s in specs if s.name not in excluded]
    names = [s.name for s in chosen]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise CorpusError(f"package {dupes[0]!r} is listed twice")
    out = prepare_output(output, force)
    results = build_packages(chosen, config, cache=cache, on_progress=on_progress, say=say)
    for r in results:  # results cached before a selection rule changed follow it too
        r.modules = [m for m in r.modules if shipped_module(m)]
    modules: list[str] = []
    languages: dict[str, str] = {}
    for r in results:
        if r.status != "built":
            continue
        src = Path(r.workdir) / "corpus"
        for m in r.modules:
            name = f"{r.name}/{m}"
            for suffix in ((".bc", ".link.json") if config.lto else (".bc", ".cmd")):
                link_or_copy(src / f"{m}{suffix}", out / f"{name}{suffix}")
            modules.append(name)
            languages[name] = r.module_language.get(m, "c")
    if config.lto:
        from .lto import write_lto_description

        write_lto_description(out, config.lto, modules)
    else:
        write_description(out, modules)
    by_name = {s.name: s for s in chosen}
    manifest = {"source": "debian", "compiler": config.compiler_version(), "flags": config.cflags.split(),
                "flags_key": config.key(), "excluded": excluded,
                "packages": [r.manifest_entry(by_name.get(r.name)) for r in results],
                "module_languages": languages,
                "module_text": {f"{r.name}/{m}": r.module_text.get(m, 0) for r in results if r.status == "built"
                                for m in r.modules}}
    write_manifest(out, manifest)
    return manifest
