"""The stock configurations a size-minded user would pick instead of mlopt
(-Oz; -Oz with gc-sections + ICF; ThinLTO; full LTO; full LTO with
gc-sections + ICF), every binary linked by lld, on the large Debian corpus's
validation and test packages (the split the trainers are measured on): the
.text of the executables and shared libraries each package ships, per
package, C and C++, and each package's best configuration. Baseline: the
package's own -Oz build, linked by lld, in the same run.

    python3 benchmarks/bench_lto_stock.py [--llvm 19] [--jobs 1] [--record]
    python3 benchmarks/bench_lto_stock.py --quick        # lz4 alone

Builds are cached per package and configuration (mlopt corpus debian's
cache); ``--record`` writes benchmarks/results/lto-stock-debian-llvm<N>.json.
"""

from __future__ import annotations

import argparse
import datetime
import json
import subprocess
import sys
from pathlib import Path

from _common import LARGE_TEST as TEST
from _common import LARGE_VALIDATION as VALIDATION
from _common import pinned_packages
from mlopt.corpus.debian import DebianConfig, PackageSpec
from mlopt.evaluation.stock_lto import compare_stock, merge_reports, stock_table

ROOT = Path(__file__).resolve().parent.parent
def record(report: dict, args) -> None:
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                            text=True).stdout.strip()
    llvm_version = subprocess.run([f"llvm-config-{args.llvm}", "--version"], capture_output=True,
                                  text=True).stdout.strip()
    out = ROOT / "benchmarks" / "results" / f"lto-stock-debian-llvm{args.llvm}.json"
    entry = {"benchmark": "benchmarks/bench_lto_stock.py",
             "command": f"python3 benchmarks/bench_lto_stock.py --llvm {args.llvm} --record",  # --resume continues it
             "problem": "stock configurations", "corpus": "Debian 12: the large corpus's validation and test packages",
             "metric": ".text of the executables and shared libraries each package ships",
             "date": datetime.date.today().isoformat(), "commit": commit, "llvm_version": llvm_version, **report,
             "baseline": "-Oz, linked by lld (each package's own build)", "baseline_config": report["baseline"]}
    out.write_text(json.dumps(entry, indent=1) + "\n")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--llvm", type=int, default=19)
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--quick", action="store_true", help="lz4 alone")
    ap.add_argument("--record", action="store_true")
    ap.add_argument("--resume", action="store_true",
                    help="keep the packages the record already has (same LLVM); build and add the others")
    args = ap.parse_args()
    names = ["lz4"] if args.quick else VALIDATION + TEST
    specs = pinned_packages(names) if not args.quick else [PackageSpec("lz4", "1.9.4-1")]
    progress = lambda event, package, done, total: print(f"[{done}/{total}] {event} {package}",  # noqa: E731
                                                         file=sys.stderr, flush=True)
    split = dict.fromkeys(VALIDATION, "validation") | dict.fromkeys(TEST, "test")
    reports = []
    path = ROOT / "benchmarks" / "results" / f"lto-stock-debian-llvm{args.llvm}.json"
    if args.resume and path.exists():
        old = json.loads(path.read_text())
        kept = {k: v for k, v in old.items() if k in ("llvm", "compiler", "configs", "packages", "failed", "totals")}
        reports.append({**kept, "baseline": old.get("baseline_config", "Oz")})
        done = {p["package"] for p in old["packages"]} | {f["package"] for f in old["failed"]}
        specs = [s for s in specs if s.name not in done]
        print(f"resuming: {len(done)} packages recorded, {len(specs)} to build", file=sys.stderr)
    report = merge_reports(reports) if reports else None
    if report is not None and args.record:
        record(report, args)
    for spec in specs:  # one package at a time (all its configurations): a long run records as it goes
        one = compare_stock([spec], DebianConfig(llvm=args.llvm, jobs=args.jobs), on_progress=progress)
        for p in one["packages"]:
            p["split"] = split.get(p["package"], "")
        reports.append(one)
        report = merge_reports(reports)
        if args.record:
            record(report, args)
    print(stock_table(report))
    for f in report["failed"]:
        print(f"{f['package']}: failed in {f['config']} at {f['stage']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
