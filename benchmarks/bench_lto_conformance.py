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


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--llvm", type=int, default=19)
    ap.add_argument("--modes", default="full,thin")
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--out", type=Path, help="where the corpora go (default: a temporary directory)")
    ap.add_argument("--quick", action="store_true", help="lz4 alone")
    ap.add_argument("--record", action="store_true")
    args = ap.parse_args()
    specs = [PackageSpec("lz4", "1.9.4-1")] if args.quick else pinned_packages(LARGE_VALIDATION + LARGE_TEST)
    out = args.out or Path(tempfile.mkdtemp(prefix="mlopt-lto-corpora-"))
    say = lambda m: print(m, file=sys.stderr, flush=True)  # noqa: E731
    progress = lambda event, package, done, total: say(f"[{done}/{total}] {event} {package}")  # noqa: E731
    modes = {}
    for mode in args.modes.split(","):
        config = DebianConfig(llvm=args.llvm, jobs=args.jobs, lto=mode, save_lto_modules=True)
        manifest = debian_corpus(specs, out / mode, config, force=True, on_progress=progress, say=say)
        stock = {r.name: r for r in build_packages(specs, stock_config(mode, DebianConfig(llvm=args.llvm,
                                                                                          jobs=args.jobs)),
                                                   on_progress=progress)}
        check = check_lto_corpus(out / mode, llvm=args.llvm,
                                 on_result=lambda d, t: say(f"  compiled {d}/{t}") if d % 50 == 0 or d == t else None)
        per_package: dict[str, dict] = {}
        for row in check["rows"]:
            p = per_package.setdefault(row["module"].split("/", 1)[0], {"modules": 0, "exact": 0})
            p["modules"] += 1
            p["exact"] += row["exact"]
        packages = []
        for entry in manifest["packages"]:
            name = entry["name"]
            base = stock.get(name)
            packages.append({"package": name, "status": entry["status"], **per_package.get(name, {}),
                             "build_cpu_seconds": entry.get("cpu_seconds"),
                             "stock_build_cpu_seconds": round(base.cpu_seconds, 1) if base and
                             base.status == "built" else None})
        cpu = sum(p["build_cpu_seconds"] or 0 for p in packages if p.get("stock_build_cpu_seconds"))
        stock_cpu = sum(p["stock_build_cpu_seconds"] for p in packages if p.get("stock_build_cpu_seconds"))
        modes[mode] = {"modules": check["modules"], "exact": check["exact"], "unchecked": check["unchecked"],
                       "engine_seconds": check["seconds"], "build_cpu_minutes": round(cpu / 60, 1),
                       "stock_build_cpu_minutes": round(stock_cpu / 60, 1),
                       "mismatches": [r for r in check["rows"] if not r["exact"]][:20], "packages": packages}
        print(f"{mode}: {check['exact']} of {check['modules']} modules' .text exact; corpus build "
              f"{cpu / 60:.1f} CPU min against {stock_cpu / 60:.1f} for the stock LTO builds")
    if args.record:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                                text=True).stdout.strip()
        llvm_version = subprocess.run([f"llvm-config-{args.llvm}", "--version"], capture_output=True,
                                      text=True).stdout.strip()
        record = {"benchmark": "bench_lto_conformance.py",
                  "command": " ".join(["python3", "benchmarks/bench_lto_conformance.py", *sys.argv[1:]]),
                  "date": datetime.date.today().isoformat(), "commit": commit, "llvm": llvm_version, "modes": modes}
        path = ROOT / "benchmarks" / "results" / f"lto-conformance-debian-llvm{args.llvm}.json"
        path.write_text(json.dumps(record, indent=1) + "\n")
        print(f"recorded: {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
