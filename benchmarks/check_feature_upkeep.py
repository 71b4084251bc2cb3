#!/usr/bin/env python3
"""Whole-corpus conformance of mlopt's feature upkeep and its inline cost
memo: training logs and objects, byte for byte, in `clang -Oz`.

Every source of the default corpus (`mlopt corpus fetch`'s pinned C and C++
sdists), compiled as its build compiles it with `clang-N -Oz` and the plugin
writing a training log (heuristic decisions), three times: LLVM's upkeep
(-mlopt-inline-features=llvm, LLVM's MLInlineAdvisor), mlopt's upkeep with
the memo off (MLOPT_INLINE_COST_MEMO=0) and with it on (=stats). Prints the
modules whose log or object differs from LLVM's (none expected) and the
memo's hits, misses and unmemoized call sites over the corpus. Exit 1 on
any difference.

Run:  python3 benchmarks/check_feature_upkeep.py --llvm 22 [--packages lz4,jsonnet] [--jobs 2] [--quick]
"""
from __future__ import annotations

import argparse
import concurrent.futures
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import mlopt
from _common import QUICK_HELP
from bench_feature_upkeep import commands
from mlopt.compiler.plugin import clang_flags

RUNS = {"llvm": ("llvm", "0"), "mlopt": ("mlopt", "0"), "mlopt+memo": ("mlopt", "stats")}


def compile_all(llvm: int, work: Path, k: int, cmd: list[str], cwd: str) -> tuple[dict, list[int]]:
    """({run: (log bytes, object bytes)}, [hits, misses, unmemoized]) for one source."""
    out = {}
    stats = [0, 0, 0]
    for run, (upkeep, memo) in RUNS.items():
        log, obj = work / f"{k}.{run}.log", work / f"{k}.{run}.o"
        r = subprocess.run([cmd[0], *clang_flags(llvm=llvm, training_log=log, overwrite_log=True),
                            "-mllvm", f"-mlopt-inline-features={upkeep}", *cmd[1:], "-o", str(obj)],
                           cwd=cwd, capture_output=True, text=True, env={**os.environ, "MLOPT_INLINE_COST_MEMO": memo})
        if r.returncode != 0:
            raise SystemExit(f"{' '.join(cmd)}: exit {r.returncode}: {r.stderr[-500:]}")
        for m in re.finditer(r"inline cost memo: (\d+) hits, (\d+) misses, (\d+) call sites", r.stderr):
            stats = [a + int(b) for a, b in zip(stats, m.groups())]
        out[run] = (log.read_bytes() if log.exists() else b"", obj.read_bytes())
        log.unlink(missing_ok=True)
        obj.unlink()
    return out, stats


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--llvm", type=int, default=19, choices=(19, 22))
    ap.add_argument("--packages", help="comma-separated subset of the default corpus' packages")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--quick", action="store_true", help=QUICK_HELP + ": 2 lz4 sources")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="mlopt-check-memo-"))
    cmds = commands(["lz4"] if args.quick else args.packages.split(",") if args.packages else None, work, args.llvm)
    cmds = cmds[:2] if args.quick else cmds
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        results = list(pool.map(lambda a: compile_all(args.llvm, work, *a),
                                [(k, cmd, cwd) for k, (_, cmd, cwd) in enumerate(cmds)]))
    print(f"LLVM {args.llvm} ({cmds[0][1][0]}): {len(cmds)} sources")
    differ = False
    for run in ("mlopt", "mlopt+memo"):
        for what, j in (("training logs", 0), ("objects", 1)):
            bad = [cmds[k][0] for k, (out, _) in enumerate(results) if out[run][j] != out["llvm"][j]]
            differ |= bool(bad)
            print(f"{what} of {run} identical to LLVM's upkeep: {len(cmds) - len(bad)} of {len(cmds)}"
                  + (f" (differ: {' '.join(bad[:8])})" if bad else ""))
    rows = sum(len(mlopt.read_log(out["llvm"][0])["inlining_decision"]) for out, _ in results if out["llvm"][0])
    hits, misses, unmemoized = (sum(r[1][j] for r in results) for j in range(3))
    answered = hits / max(hits + misses + 2 * unmemoized, 1)
    print(f"memo: {hits} hits, {misses} misses, {unmemoized} call sites not memoized "
          f"({answered:.1%} of the analyses answered by the memo); {rows} call sites in the logs")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
