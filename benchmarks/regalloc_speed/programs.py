"""Programs for the regalloc speed studies: where their sources come from,
how they are built and what one measured run does.

``lz4`` and ``zstd`` come from the default corpus' sdists (so they are in
mlopt's training corpora) and run ``codec_bench.c``. The others are Debian
source packages in no training corpus of mlopt (neither the default corpus
nor ``corpus/debian_packages.txt``), fetched through apt (every file checked
against the signed index), each run through its own command-line program on
a deterministic input made from its own source text (or, for cJSON, a JSON
document generated from a fixed seed).
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, replace
from pathlib import Path

HERE = Path(__file__).resolve().parent


@dataclass(frozen=True)
class Program:
    name: str
    origin: str  # "sdist:<default-corpus package>" or "debian:<source package>=<version>"
    sources: tuple[str, ...]  # globs relative to the source tree; "@x.c": a file next to this module
    cflags: tuple[str, ...] = ()  # "{tree}" is the source tree
    args: tuple[str, ...] = ()  # the measured run's arguments; "{input}" is the input file
    input: str | None = None  # "text:<bytes>" (the tree's own sources) or "json:<objects>"
    in_corpus: bool = False

    def scaled(self, k: int) -> Program:
        """The same program on an input k times as large."""
        if k == 1 or self.input is None:
            return self
        kind, _, amount = self.input.partition(":")
        return replace(self, input=f"{kind}:{int(amount) * k}")

    def tree(self, cache: Path) -> Path:
        kind, _, spec = self.origin.partition(":")
        if kind == "sdist":
            from mlopt.corpus.fetch import PACKAGES, cache_dir, sdist_source

            return sdist_source(next(p for p in PACKAGES if p.name == spec), cache_dir())
        name, _, version = spec.partition("=")
        dest = cache / "sources" / f"{name}-{version}"
        done = dest / ".unpacked"
        if not done.exists():
            from mlopt.debian.apt_sources import download_source

            tree = download_source(name, version, dest)
            done.write_text(str(tree))
        return Path(done.read_text())

    def source_files(self, tree: Path) -> list[Path]:
        out: list[Path] = []
        for g in self.sources:
            found = [HERE / g[1:]] if g.startswith("@") else sorted(tree.glob(g))
            if not found:
                raise FileNotFoundError(f"{self.name}: no source matches {g} in {tree}")
            out += found
        return out

    def flags(self, tree: Path) -> list[str]:
        return [f.format(tree=tree) for f in self.cflags]

    def make_input(self, tree: Path, out: Path) -> Path | None:
        if self.input is None:
            return None
        kind, _, amount = self.input.partition(":")
        path = out / f"{self.name}-{amount}.input"
        if path.exists():
            return path
        if kind == "text":
            text = b"".join(p.read_bytes() for p in sorted(tree.rglob("*.[ch]")) if p.is_file())
            size = int(amount)
            path.write_bytes((text * (size // max(len(text), 1) + 1))[:size])
        else:
            path.write_text(json.dumps(_json_document(int(amount), tree)))
        return path

    def run_args(self, input_path: Path | None) -> list[str]:
        return [a.format(input=input_path) for a in self.args]


def _json_document(objects: int, tree: Path) -> list:
    rng = random.Random(24)
    words = b" ".join(p.read_bytes() for p in sorted(tree.glob("*.[ch]"))).decode("latin-1").split()[:50_000]

    def value(depth: int):
        if depth > 3 or rng.random() < 0.3:
            c = rng.random()
            if c < 0.4:
                return rng.choice(words)
            if c < 0.7:
                return rng.randint(-10**6, 10**6)
            if c < 0.9:
                return round(rng.uniform(-1e3, 1e3), 6)
            return rng.choice([True, False, None])
        if rng.random() < 0.5:
            return {f"{rng.choice(words)[:12]}_{i}": value(depth + 1) for i in range(rng.randint(1, 8))}
        return [value(depth + 1) for _ in range(rng.randint(1, 8))]

    return [value(0) for _ in range(objects)]


_ZLIB = ("adler32", "crc32", "deflate", "infback", "inffast", "inflate", "inftrees", "trees", "zutil", "compress",
         "uncompr", "gzclose", "gzlib", "gzread", "gzwrite")

PROGRAMS = {p.name: p for p in (
    Program("lz4", "sdist:lz4", ("lz4libs/lz4.c", "lz4libs/lz4hc.c", "@codec_bench.c"),
            ("-I{tree}/lz4libs", "-DCODEC_LZ4"), ("1",), in_corpus=True),
    Program("zstd", "sdist:zstandard", ("zstd/zstd.c", "@codec_bench.c"), ("-I{tree}/zstd", "-w", "-DCODEC_ZSTD"),
            ("1",), in_corpus=True),
    Program("zlib", "debian:zlib=1:1.2.13.dfsg-1", (*(f"{f}.c" for f in _ZLIB), "test/minigzip.c"),
            ("-I{tree}", "-D_LARGEFILE64_SOURCE=1"), ("-c", "-9", "{input}"), "text:3000000"),
    Program("libdeflate", "debian:libdeflate=1.14-1",
            ("lib/*.c", "lib/x86/*.c", "programs/gzip.c", "programs/prog_util.c", "programs/tgetopt.c"),
            ("-I{tree}",), ("-c", "-12", "{input}"), "text:2000000"),
    Program("ncompress", "debian:ncompress=4.2.4.6-6", ("compress42.c",), ("-DUTIME_H=1",),
            ("-c", "{input}"), "text:8000000"),
    Program("cjson", "debian:cjson=1.7.15-1+deb12u4", ("cJSON.c", "@cjson_bench.c"), ("-I{tree}",),
            ("{input}", "2"), "json:700"),
)}
