"""LTO corpora of Debian packages and the engine's conformance on them: each
package built by its own build system with -Oz -flto=MODE, linked by lld with
the plugin saving every module LTO optimizes (mlopt corpus debian --lto);
then every module compiled in process and its .text compared with lld's own
object of it. Also what saving the corpus costs: the build's CPU time against
the same package's stock LTO build (bench_lto_stock.py's, from the cache, or
built here). Packages: the large corpus's validation and test packages.

    python3 benchmarks/bench_lto_conformance.py [--llvm 19] [--modes full,thin] [--record]
    python3 benchmarks/bench_lto_conformance.py --quick        # lz4 alone

``--record`` writes benchmarks/results/lto-conformance-debian-llvm<N>.json.
"""

from __future__ import annotations

import argparse
import datetime
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from _common import LARGE_TEST, LARGE_VALIDATION, pinned_packages
from mlopt.corpus.debian import DebianConfig, PackageSpec, build_packages, debian_corpus
from mlopt.evaluation.lto_conformance import check_lto_corpus
from mlopt.evaluation.stock_lto import stock_config

ROOT = Path(__file__).resolve().parent.parent


def summarize(modes: dict) -> dict:
    out = {}
    for mode, m in modes.items():
        built = [p for p in m["packages"] if p["status"] == "built"]
        both = [p for p in built if p.get("stock_build_cpu_seconds")]
        out[mode] = {"built": len(built), "failed": [p for p in m["packages"] if p["status"] != "built"],
                     "modules": sum(p["modules"] for p in built), "exact": sum(p["exact"] for p in built),
                     "build_cpu_minutes": round(sum(p["build_cpu_seconds"] for p in both) / 60, 1),
                     "stock_build_cpu_minutes": round(sum(p["stock_build_cpu_seconds"] for p in both) / 60, 1),
                     "engine_seconds": round(sum(p["engine_seconds"] for p in built), 1),
                     "mismatches": m["mismatches"][:20], "packages": m["packages"]}
    return out


def record(modes: dict, args) -> None:
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                            text=True).stdout.strip()
    llvm_version = subprocess.run([f"llvm-config-{args.llvm}", "--version"], capture_output=True,
                                  text=True).stdout.strip()
    entry = {"benchmark": "benchmarks/bench_lto_conformance.py",
             "command": f"python3 benchmarks/bench_lto_conformance.py --llvm {args.llvm} --record",  # --resume: more
             "problem": "LTO conformance", "corpus": "Debian 12: the large corpus's validation and test packages",
             "baseline": "the object lld's LTO backend made of each module, in the same build",
             "metric": "modules whose in-process .text equals lld's",
             "date": datetime.date.today().isoformat(), "commit": commit, "llvm_version": llvm_version,
             "modes": modes}
    path = ROOT / "benchmarks" / "results" / f"lto-conformance-debian-llvm{args.llvm}.json"
    path.write_text(json.dumps(entry, indent=1) + "\n")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--llvm", type=int, default=19)
    ap.add_argument("--modes", default="full,thin")
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--out", type=Path, help="where the corpora go (default: a temporary directory)")
    ap.add_argument("--quick", action="store_true", help="lz4 alone")
    ap.add_argument("--record", action="store_true")
    ap.add_argument("--resume", action="store_true",
                    help="keep the packages the record already has (same LLVM); build and add the others")
    args = ap.parse_args()
    specs = [PackageSpec("lz4", "1.9.4-1")] if args.quick else pinned_packages(LARGE_VALIDATION + LARGE_TEST)
    out = args.out or Path(tempfile.mkdtemp(prefix="mlopt-lto-corpora-"))
    say = lambda m: print(m, file=sys.stderr, flush=True)  # noqa: E731
    progress = lambda event, package, done, total: say(f"[{done}/{total}] {event} {package}")  # noqa: E731
    modes: dict[str, dict] = {}
    path = ROOT / "benchmarks" / "results" / f"lto-conformance-debian-llvm{args.llvm}.json"
    if args.resume and path.exists():
        old = json.loads(path.read_text())["modes"]
        modes = {mode: {"packages": m["packages"], "mismatches": m["mismatches"]} for mode, m in old.items()}
        done = set.intersection(*({p["package"] for p in m["packages"]} for m in modes.values()))
        specs = [s for s in specs if s.name not in done]
        say(f"resuming: {len(done)} packages recorded, {len(specs)} to build")
    summary = summarize(modes)
    if modes and args.record:
        record(summary, args)
    for spec in specs:  # one package at a time, both modes: a long run records as it goes
        for mode in args.modes.split(","):
            packages = modes.setdefault(mode, {"packages": [], "mismatches": []})
            packages["packages"] = [p for p in packages["packages"] if p["package"] != spec.name]  # a resumed one
            config = DebianConfig(llvm=args.llvm, jobs=args.jobs, lto=mode, save_lto_modules=True)
            corpus = out / mode / spec.name
            manifest = debian_corpus([spec], corpus, config, force=True, on_progress=progress, say=say)
            entry = manifest["packages"][0]
            [stock] = build_packages([spec], stock_config(mode, DebianConfig(llvm=args.llvm, jobs=args.jobs)),
                                     on_progress=progress)
            row = {"package": spec.name, "status": entry["status"], "build_cpu_seconds": entry.get("cpu_seconds"),
                   "stock_build_cpu_seconds": round(stock.cpu_seconds, 1) if stock.status == "built" else None}
            if entry["status"] == "built":
                check = check_lto_corpus(corpus, llvm=args.llvm)
                row.update(modules=check["modules"], exact=check["exact"], engine_seconds=check["seconds"])
                packages["mismatches"] += [r for r in check["rows"] if not r["exact"]]
            else:
                row.update(stage=entry.get("stage"), reason=entry.get("reason", "")[-300:])
            packages["packages"].append(row)
            say(f"{mode} {spec.name}: {row.get('exact', 0)} of {row.get('modules', 0)} exact")
        summary = summarize(modes)
        if args.record:
            record(summary, args)
    for mode, m in summary.items():
        print(f"{mode}: {m['exact']} of {m['modules']} modules' .text exact in {m['built']} packages; corpus build "
              f"{m['build_cpu_minutes']} CPU min against {m['stock_build_cpu_minutes']} for the stock LTO builds")
    return 0


if __name__ == "__main__":
    sys.exit(main())
