"""``mlopt tune`` across time: decisions searched on one release of a code
base, applied to a release years later.

For each pair (C libraries that PyPI sdists bundle: lz4 1.9.3 in
python-lz4 3.1.3 of 2021 and 1.9.4 in 4.3.3 of 2024; brotli 1.0.9 of 2020
and 1.1.0 of 2023, the library and its command-line tool), both releases
are built the way a user would, with stock clang + lld, full LTO,
``--gc-sections --icf=all`` and the plugin saving the merged modules
(``mlopt clang-flags --lto full --save-lto-modules``). ``tune_corpus``
searches the old release; ``check_tuned`` says how many of its decisions
still name a callee of the new release and what they save there; the new
release is then rebuilt with the old decisions (``--callee-decisions
DIR/%m.txt``) and its binaries' ``.text`` must be what the check said.
For scale, the new release is also tuned itself with the same budget:
the share of that saving the old decisions keep.

    python3 benchmarks/bench_tune_versions.py --evaluations 48 --out /tmp/tv --record
    python3 benchmarks/bench_tune_versions.py --quick --out /tmp/tvq     # lz4 only, 4 compiles per binary
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tarfile
import time
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
from _common import write_report  # noqa: E402

CACHE = Path(os.environ.get("MLOPT_TEST_CACHE", Path.home() / ".cache" / "mlopt-tests"))

# pair: (PyPI project, old release, new release, library sources, include dirs, {tool: its own sources})
PAIRS = {
    "lz4": ("lz4", "3.1.3", "4.3.3", ["lz4libs/*.c"], ["lz4libs"], {}),
    "brotli": ("Brotli", "1.0.9", "1.1.0", ["c/common/*.c", "c/dec/*.c", "c/enc/*.c"], ["c/include"],
               {"brotli": ["c/tools/brotli.c"]}),
}
LIBRARY = {"lz4": "liblz4.so", "brotli": "libbrotli.so"}
GC_ICF = "-Wl,--gc-sections,--icf=all"


def sdist(project: str, version: str) -> Path:
    """The sdist's top directory (downloaded once into the cache)."""
    root = CACHE / f"{project.lower()}-{version}"
    if not root.exists():
        CACHE.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-binary", ":all:",
                        f"{project}=={version}", "-d", str(CACHE)], check=True)
        archive = next(p for p in CACHE.iterdir() if p.name.lower() in
                       (f"{project.lower()}-{version}.tar.gz", f"{project.lower()}-{version}.zip"))
        partial = CACHE / f".{root.name}.partial"
        if archive.suffix == ".zip":
            with zipfile.ZipFile(archive) as z:
                z.extractall(partial)
        else:
            with tarfile.open(archive) as tar:
                tar.extractall(partial, filter="data")
        partial.rename(root)
    return next(root.iterdir())


def build(pair: str, version: str, out: Path, major: int, flags: list[str]) -> dict[str, Path]:
    """The release's binaries in ``out`` (same relative names for every release: the decisions' %m)."""
    project, _, _, patterns, includes, tools = PAIRS[pair]
    top = sdist(project, version)
    sources = sorted(p for pat in patterns for p in top.glob(pat))
    inc = [f"-I{top / d}" for d in includes]
    obj = out / "obj"
    obj.mkdir(parents=True, exist_ok=True)
    cc = [f"clang-{major}", "-Oz", "-fPIC", "-w", *inc, *flags]
    objects = {}
    for s in sources + [top / t for ts in tools.values() for t in ts]:
        o = obj / (str(s.relative_to(top)).replace("/", "_") + ".o")
        subprocess.run([*cc, "-c", str(s), "-o", str(o)], check=True, capture_output=True, cwd=out)
        objects[s] = o
    lib = [objects[s] for s in sources]
    built = {LIBRARY[pair]: out / LIBRARY[pair]}
    subprocess.run([*cc, "-shared", *map(str, lib), GC_ICF, "-o", LIBRARY[pair]], check=True, capture_output=True,
                   cwd=out)
    for tool, own in tools.items():
        subprocess.run([*cc, *(str(objects[top / t]) for t in own), *map(str, lib), GC_ICF, "-lm", "-o", tool],
                       check=True, capture_output=True, cwd=out)
        built[tool] = out / tool
    return built


def text_of(binaries: dict[str, Path]) -> dict[str, int]:
    from mlopt.corpus.elf import read_sections, text_bytes

    return {b: text_bytes(read_sections(p)) for b, p in binaries.items()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pairs", default=",".join(PAIRS))
    ap.add_argument("--llvm", type=int, default=19)
    ap.add_argument("--evaluations", type=int, default=48, help="compiles per binary and search (48)")
    ap.add_argument("--workers", type=int)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--record", action="store_true", help="write benchmarks/results/tune-versions-llvm<N>.json")
    ap.add_argument("--quick", action="store_true", help="lz4 only, 4 compiles per binary")
    args = ap.parse_args()
    os.environ["MLOPT_LLVM"] = str(args.llvm)
    if args.quick:
        args.pairs, args.evaluations = "lz4", 4
    from mlopt._native import engine
    from mlopt.compiler.plugin import clang_flags
    from mlopt.corpus.lto import extract_lto_corpus
    from mlopt.training.tune import check_tuned, tune_corpus
    from mlopt.workers import make_pool

    say = lambda text: print(text, file=sys.stderr, flush=True)  # noqa: E731
    rows = {}
    with make_pool(args.workers, timeout=3600) as pool:
        for pair in args.pairs.split(","):
            project, old, new, *_ = PAIRS[pair]
            base = args.out / pair
            corpora, stock = {}, {}
            for version in (old, new):
                where = base / version
                save = clang_flags(lto="full", llvm=args.llvm, save_lto_modules=where / "modules")
                stock[version] = text_of(build(pair, version, where / "build", args.llvm, save))
                extract_lto_corpus(where / "modules", where / "corpus", force=True)
                corpora[version] = where / "corpus"
            say(f"{pair}: {old} and {new} built ({sum(stock[old].values()):,} and {sum(stock[new].values()):,} "
                "bytes of .text)")
            t = time.perf_counter()
            tuned = tune_corpus(corpora[old], base / "decisions", evaluations=args.evaluations, pool=pool, force=True,
                                say=lambda s, tag=f"{pair} {old}": say(f"  {tag}: {s}"))
            tune_minutes = (time.perf_counter() - t) / 60
            checked = check_tuned(corpora[new], base / "decisions", pool=pool)
            flags = clang_flags(lto="full", llvm=args.llvm, callee_decisions=str(base / "decisions" / "%m.txt"))
            rebuilt = text_of(build(pair, new, base / new / "rebuilt", args.llvm, flags))
            by_name = {Path(b["module_name"]).name.removesuffix(".lto"): b for b in checked["binaries"].values()}
            exact = all(rebuilt[b] == by_name[b]["with"] for b in rebuilt)
            fresh = tune_corpus(corpora[new], base / "fresh", evaluations=args.evaluations, pool=pool, force=True)
            rows[pair] = {"old": old, "new": new, "project": project, "stock": stock, "tuned": tuned,
                          "tune_minutes": tune_minutes, "checked": checked, "rebuilt": rebuilt,
                          "rebuild_exact": exact, "fresh": fresh}
            say(f"{pair}: {old} tuned {tuned['before']:,} -> {tuned['after']:,}; {new} with {old}'s decisions "
                f"{checked['without']:,} -> {checked['with']:,} (rebuilt: {'exact' if exact else 'DIFFERENT'}); "
                f"{new} tuned itself {fresh['after']:,}")
    pct = lambda a, b: 100.0 * (a - b) / b if b else 0.0  # noqa: E731
    version = engine(args.llvm).llvm_version
    print(f"mlopt tune across releases, LLVM {version}, {args.evaluations} compiles per binary; .text linked with "
          "full LTO + --gc-sections --icf=all (stock = the same build without decisions)")
    print("| code base | old release: tuned | compiles | minutes | decisions | new release: still apply | "
          "new: with the old decisions | new: tuned itself | kept | rebuild = check |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for pair, r in rows.items():
        t, c, f = r["tuned"], r["checked"], r["fresh"]
        decisions = sum(b["decisions"] for b in t["binaries"].values())
        apply = sum(b["apply"] for b in c["binaries"].values())
        kept = (c["without"] - c["with"]) / (f["before"] - f["after"]) if f["before"] > f["after"] else 0.0
        r["kept_share"] = kept
        print(f"| {pair} {r['old']} -> {r['new']} | **{pct(t['after'], t['before']):+.2f}%** | {t['compiles']} | "
              f"{r['tune_minutes']:.1f} | {decisions} | {apply} of {decisions} | "
              f"**{pct(c['with'], c['without']):+.2f}%** | {pct(f['after'], f['before']):+.2f}% | {kept:.0%} | "
              f"{'yes' if r['rebuild_exact'] else 'no'} |")
    report = {"benchmark": "benchmarks/bench_tune_versions.py", "llvm": args.llvm, "llvm_version": version,
              "command": "python3 benchmarks/bench_tune_versions.py " + " ".join(sys.argv[1:]),
              "problem": "inlining-lto: mlopt tune's decisions on a later release",
              "corpus": "C libraries bundled by PyPI sdists, two releases each",
              "metric": "the binaries' .text, full LTO + --gc-sections --icf=all",
              "baseline": "the same release built without decisions (stock clang + lld)",
              "evaluations_per_binary": args.evaluations, "pairs": rows}
    record = f"tune-versions-llvm{args.llvm}.json" if args.record else None
    write_report(report, args.out / "tune-versions.json", record)
    return 0 if all(r["rebuild_exact"] for r in rows.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
