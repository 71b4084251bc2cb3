"""``mlopt corpus fetch``: the default corpus, real third-party C and C++
from pinned PyPI source distributions (name, version, SHA-256), compiled by
clang-19 / clang++-19 ``-Oz -c -Xclang -fembed-bitcode=all`` as a build
would, then extracted (:mod:`.extract`). Downloads and builds are cached
under the user cache directory (``$MLOPT_CACHE``, else
``$XDG_CACHE_HOME/mlopt`` or ``~/.cache/mlopt``)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from ..debian.apt_sources import file_sha256
from ..errors import CorpusError
from .description import read_description
from .elf import read_sections, text_bytes
from .extract import ExtractReport, extract_corpus, objects_from_compile_commands
from .manifest import write_manifest

CORPUS_VERSION = "v2"  # bump when packages or flags change: cached corpora are keyed by it


@dataclass(frozen=True)
class Package:
    """A pinned sdist and how its sources are compiled."""

    name: str
    version: str
    sha256: str
    archive: str
    language: str  # "c" or "c++"
    sources: tuple[str, ...]  # globs relative to the sdist's top directory
    include: tuple[str, ...] = ()
    flags: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()  # file names left out (need configure-time settings)


PACKAGES: tuple[Package, ...] = (
    Package("lz4", "4.3.3", "01fe674ef2889dbb9899d8a67361e0c4a2c833af5aeb37dd505727cf5d2a131e",
            "lz4-4.3.3.tar.gz", "c", ("lz4libs/*.c",), ("lz4libs",)),
    Package("brotli", "1.1.0", "81de08ac11bcb85841e440c13611c00b67d3bf82698314928d0b676362546724",
            "Brotli-1.1.0.tar.gz", "c", ("c/common/*.c", "c/dec/*.c", "c/enc/*.c"), ("c/include",)),
    Package("zstandard", "0.23.0", "b2d8c62d08e7255f68f7a740bae85b3c9b8e5466baa9cbf7f57f1cde0ac6bc09",
            "zstandard-0.23.0.tar.gz", "c", ("zstd/zstd.c",), ("zstd",), ("-w",)),
    Package("pycryptodome", "3.20.0", "09609209ed7de61c2b560cc5c8c4fbf892f8b15b1faf7e4cbffac97db1fffda7",
            "pycryptodome-3.20.0.tar.gz", "c", ("src/*.c",), ("src",),
            ("-DHAVE_STDINT_H", "-DHAVE_UINT128", "-DHAVE_POSIX_MEMALIGN", "-w"),
            ("AESNI.c", "DES.c", "DES3.c", "blake2.c", "block_common.c", "blowfish_init.c", "cpuid.c",
             "ghash_clmul.c", "hash_SHA2_template.c", "mont.c", "mont1.c", "mont2.c", "make_p256_table.c",
             "make_p384_table.c", "make_p521_table.c", "ed25519_perf.c", "ed448_perf.c")),
    Package("jsonnet", "0.20.0", "7e770c7bf3a366b97b650a39430450f77612e74406731eb75c5bd59f3f104d4f",
            "jsonnet-0.20.0.tar.gz", "c++",
            ("core/*.cpp", "third_party/md5/md5.cpp", "third_party/rapidyaml/rapidyaml/src/c4/yml/*.cpp",
             "third_party/rapidyaml/rapidyaml/ext/c4core/src/c4/*.cpp"),
            ("include", "core", "third_party/md5", "third_party/json", "third_party/rapidyaml/rapidyaml/src",
             "third_party/rapidyaml/rapidyaml/ext/c4core/src", "stdlib"),
            ("-std=c++17",), ("lexer_test.cpp", "libjsonnet_test.cpp", "parser_test.cpp")),
    Package("marisa-trie", "1.2.1", "3a27c408e2aefc03e0f1d25b2ff2afb85aac3568f6fa2ae2a53b57a2e87ce29d",
            "marisa_trie-1.2.1.tar.gz", "c++", ("marisa-trie/lib/**/*.cc",),
            ("marisa-trie/include", "marisa-trie/lib"), ("-std=c++17",)),
    Package("ujson", "5.10.0", "b3cd8f3c5d8c7738257f1018880444f7b7d9b66232c64649f562d7ba86ad4bc1",
            "ujson-5.10.0.tar.gz", "c++", ("deps/double-conversion/double-conversion/*.cc",),
            ("deps/double-conversion",), ("-std=c++17",)),
)


def package_names() -> list[str]:
    return [p.name for p in PACKAGES]


def cache_dir() -> Path:
    if os.environ.get("MLOPT_CACHE"):
        return Path(os.environ["MLOPT_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "mlopt"


def _select(names: Sequence[str] | None) -> list[Package]:
    if not names:
        return list(PACKAGES)
    known = {p.name: p for p in PACKAGES}
    unknown = [n for n in names if n not in known]
    if unknown:
        raise CorpusError(f"unknown package {unknown[0]!r} (known: {', '.join(known)})")
    return [known[n] for n in names]


def sdist_source(pkg: Package, cache: Path) -> Path:
    """The unpacked sdist's top directory (downloaded and checked once)."""
    root = cache / "sdists"
    top = root / f"{pkg.name}-{pkg.version}"
    if (top / ".complete").exists():
        return next(p for p in top.iterdir() if p.is_dir())
    root.mkdir(parents=True, exist_ok=True)
    archive = root / pkg.archive
    if not archive.exists() or file_sha256(archive) != pkg.sha256:
        r = subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-binary", ":all:",
                            f"{pkg.name}=={pkg.version}", "-d", str(root)], capture_output=True, text=True)
        if r.returncode != 0 or not archive.exists():
            tail = (r.stderr.strip().splitlines() or ["no output"])[-1]
            raise CorpusError(f"cannot download {pkg.name}=={pkg.version} from PyPI: {tail}")
    digest = file_sha256(archive)
    if digest != pkg.sha256:
        raise CorpusError(f"{archive}: SHA-256 {digest} is not the pinned {pkg.sha256}")
    partial = root / f".{pkg.name}-{pkg.version}.partial"
    shutil.rmtree(partial, ignore_errors=True)
    with tarfile.open(archive) as tar:
        tar.extractall(partial, filter="data")
    shutil.rmtree(top, ignore_errors=True)
    partial.rename(top)
    (top / ".complete").touch()
    return next(p for p in top.iterdir() if p.is_dir())


def package_sources(pkg: Package, top: Path) -> list[Path]:
    files = sorted({p for pattern in pkg.sources for p in top.glob(pattern)
                    if p.is_file() and p.name not in pkg.exclude})
    if not files:
        raise CorpusError(f"{pkg.name}: no sources match {', '.join(pkg.sources)} in {top}")
    return files


def compile_commands(packages: list[Package], cache: Path, build: Path) -> list[dict]:
    """A compile_commands.json for the packages, objects under ``build``."""
    entries = []
    for pkg in packages:
        top = sdist_source(pkg, cache)
        compiler = "clang++-19" if pkg.language == "c++" else "clang-19"
        includes = [f"-I{top / d}" for d in pkg.include]
        for src in package_sources(pkg, top):
            obj = f"{pkg.name}/{src.relative_to(top)}.o"
            args = [compiler, "-Oz", *pkg.flags, *includes, "-Xclang", "-fembed-bitcode=all", "-c", str(src),
                    "-o", obj]
            entries.append({"directory": str(build), "file": str(src), "arguments": args, "output": obj})
    return entries


def _compile(entry: dict) -> str | None:
    obj = Path(entry["directory"]) / entry["output"]
    obj.parent.mkdir(parents=True, exist_ok=True)
    r = subprocess.run(entry["arguments"], cwd=entry["directory"], capture_output=True, text=True)
    return None if r.returncode == 0 else (r.stderr.strip().splitlines() or ["failed"])[0]


def fetch_corpus(output: str | os.PathLike | None = None, packages: Sequence[str] | None = None, *,
                 threads: int | None = None, force: bool = False, exclude: Sequence[str] = (),
                 on_progress: Callable[[str, int, int], None] | None = None) -> ExtractReport:
    """Builds the default corpus (or the named ``packages``, less
    ``exclude``) into ``output`` (default: ``<cache>/corpus-<version>[-<packages>]``,
    reused when complete), with its manifest (:mod:`.manifest`)."""
    selected = _select(packages)
    unknown = sorted(set(exclude) - {p.name for p in PACKAGES})
    if unknown:
        raise CorpusError(f"cannot exclude unknown package {unknown[0]!r} (known: {', '.join(package_names())})")
    selected = [p for p in selected if p.name not in set(exclude)]
    if not selected:
        raise CorpusError("every package is excluded")
    cache = cache_dir()
    subset = packages or exclude
    label = CORPUS_VERSION + ("" if not subset else "-" + "-".join(sorted(p.name for p in selected)))
    out = Path(output) if output is not None else cache / f"corpus-{label}"
    build = cache / f"build-{label}"
    if output is None and (out / "corpus_description.json").exists() and not force:
        return ExtractReport(out, read_description(out)["modules"])
    shutil.rmtree(build, ignore_errors=True)
    build.mkdir(parents=True)
    entries = compile_commands(selected, cache, build)
    (build / "compile_commands.json").write_text(json.dumps(entries, indent=2) + "\n")
    failures = []
    with ThreadPoolExecutor(max_workers=threads or os.cpu_count() or 1) as ex:
        for i, (entry, err) in enumerate(zip(entries, ex.map(_compile, entries))):
            if err:
                failures.append(f"{entry['file']}: {err}")
            if on_progress:
                on_progress("compile", i + 1, len(entries))
    if failures:
        raise CorpusError(f"{len(failures)} of {len(entries)} sources failed to compile; first: {failures[0]}")
    objects = objects_from_compile_commands(build / "compile_commands.json")
    progress = (lambda done, total: on_progress("extract", done, total)) if on_progress else None
    report = extract_corpus(objects, out, threads=threads, force=force or output is None, on_progress=progress)
    write_manifest(out, _manifest(selected, objects, report, sorted(set(exclude))))
    return report


def _manifest(selected: list[Package], objects: list, report: ExtractReport, excluded: list[str]) -> dict:
    by_name = {o.name: o.path for o in objects}
    text = {m: text_bytes(read_sections(by_name[m])) for m in report.modules}
    packages = []
    for pkg in selected:
        mods = [m for m in report.modules if m.split("/", 1)[0] == pkg.name]
        total = sum(text[m] for m in mods)
        packages.append({"name": pkg.name, "version": pkg.version, "status": "built", "source_sha256": pkg.sha256,
                         "modules": len(mods), "text": total,
                         "languages": {pkg.language: {"modules": len(mods), "text": total}}})
    language = {p.name: p.language for p in selected}
    return {"source": "pypi", "compiler": "clang-19", "flags": ["-Oz", "-Xclang", "-fembed-bitcode=all"],
            "excluded": excluded, "packages": packages,
            "module_languages": {m: language[m.split("/", 1)[0]] for m in report.modules}, "module_text": text}
