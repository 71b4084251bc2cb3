"""Real C code for tests: PyPI sdists fetched at test time, compiled by clang-19.

Sources are cached in $MLOPT_TEST_CACHE (default ~/.cache/mlopt-tests) so a
machine downloads each sdist once.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
from pathlib import Path

CACHE = Path(os.environ.get("MLOPT_TEST_CACHE", Path.home() / ".cache" / "mlopt-tests"))

# name, version, C files (globs inside the sdist), include dirs (relative)
SDISTS = {
    "lz4": ("4.3.3", ["*/lz4libs/*.c"], ["lz4libs"]),
    "brotli": ("1.1.0", ["*/c/common/*.c", "*/c/dec/*.c", "*/c/enc/*.c"], ["c/include"]),
    # Benchmark-only sets (benchmarks/ use all; tests use TEST_SDISTS).
    "zstandard": ("0.23.0", ["*/zstd/zstd.c"], ["zstd"]),
    "pycryptodome": ("3.20.0", ["*/src/*.c"], ["src"]),
}
TEST_SDISTS = ("lz4", "brotli")
# Per-sdist compile flags, and sources that need configure-time flags we do not set.
EXTRA_FLAGS = {
    "pycryptodome": ["-DHAVE_STDINT_H", "-DHAVE_UINT128", "-DHAVE_POSIX_MEMALIGN", "-w"],
    "zstandard": ["-w"],
}
EXCLUDE = {
    "pycryptodome": {"AESNI.c", "DES.c", "DES3.c", "blake2.c", "block_common.c", "blowfish_init.c",
                     "cpuid.c", "ghash_clmul.c", "hash_SHA2_template.c", "mont.c", "mont1.c", "mont2.c"},
}


def sdist_dir(name: str) -> Path:
    version, _, _ = SDISTS[name]
    root = CACHE / f"{name}-{version}"
    if root.exists():
        return root
    CACHE.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-binary", ":all:",
         f"{name}=={version}", "-d", str(CACHE)],
        check=True,
    )
    archive = next(p for p in CACHE.glob("*.tar.gz") if p.name.lower() == f"{name}-{version}.tar.gz")
    partial = CACHE / f".{name}-{version}.partial"
    with tarfile.open(archive) as tar:
        tar.extractall(partial, filter="data")
    partial.rename(root)
    return root


def c_sources(name: str) -> list[Path]:
    _, patterns, _ = SDISTS[name]
    root = sdist_dir(name)
    files = [p for p in sorted(root.rglob("*.c"))
             if any(p.relative_to(root).match(pat) for pat in patterns)
             and p.name not in EXCLUDE.get(name, ())]
    assert files, f"no C sources matched in {root}"
    return files


def include_flags(name: str) -> list[str]:
    root = sdist_dir(name)
    top = next(root.iterdir())
    return [f"-I{top / d}" for d in SDISTS[name][2]]


def bitcode(clang: str, source: Path, out_dir: Path, opt_level: str = "-Oz",
            flags: list[str] = ()) -> Path:
    """Pre-optimization IR carrying the -Oz attributes (what the inliner sees)."""
    out = out_dir / (source.parent.name + "_" + source.stem + ".bc")
    if out.exists():
        raise FileExistsError(f"{out}: two corpus sources map to the same module name")
    subprocess.run([clang, opt_level, *flags, "-Xclang", "-disable-llvm-passes", "-emit-llvm", "-c",
                    str(source), "-o", str(out)], check=True)
    return out


def corpus(clang: str, out_dir: Path, names=TEST_SDISTS) -> list[Path]:
    """Bitcode of every module of the named sdists (tests: lz4 + brotli, 35
    modules; all of SDISTS: 92 modules)."""
    modules = []
    for name in names:
        flags = include_flags(name) + EXTRA_FLAGS.get(name, [])
        modules += [bitcode(clang, src, out_dir, flags=flags) for src in c_sources(name)]
    return modules
