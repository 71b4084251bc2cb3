#!/usr/bin/env python3
"""Whole-corpus check of the inline cost memo: training logs and objects with
the memo on and off, byte for byte, in `clang -Oz`.

Every source of the default corpus (`mlopt corpus fetch`'s pinned C and C++
sdists), compiled as its build compiles it with `clang-N -Oz` and the plugin
writing a training log (mlopt's feature upkeep, heuristic decisions), twice:
MLOPT_INLINE_COST_MEMO=0 (LLVM's two cost analyses at every call site) and
=stats (answered from the memo where the context repeats). Prints the modules
whose log or object differs (none expected) and the memo's hits, misses and
unmemoized call sites over the corpus. Exit 1 on any difference.

Run:  python3 benchmarks/check_inline_cost_memo.py --llvm 22 [--packages lz4,jsonnet] [--jobs 2]
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

from bench_feature_upkeep import commands
from mlopt.compiler.plugin import clang_flags


def compile_both(llvm: int, work: Path, k: int, cmd: list[str], cwd: str) -> tuple[bool, bool, list[int]]:
    """(logs equal, objects equal, [hits, misses, unmemoized]) for one source."""
    out = {}
    stats = [0, 0, 0]
    for memo in ("0", "stats"):
        log, obj = work / f"{k}.{memo}.log", work / f"{k}.{memo}.o"
        r = subprocess.run([cmd[0], *clang_flags(llvm=llvm, training_log=log, overwrite_log=True), *cmd[1:],
                            "-o", str(obj)], cwd=cwd, capture_output=True, text=True,
                           env={**os.environ, "MLOPT_INLINE_COST_MEMO": memo})
        if r.returncode != 0:
            raise SystemExit(f"{' '.join(cmd)}: exit {r.returncode}: {r.stderr[-500:]}")
        for m in re.finditer(r"inline cost memo: (\d+) hits, (\d+) misses, (\d+) call sites", r.stderr):
            stats = [a + int(b) for a, b in zip(stats, m.groups())]
        out[memo] = (log.read_bytes() if log.exists() else b"", obj.read_bytes())
        log.unlink(missing_ok=True)
        obj.unlink()
    return out["0"][0] == out["stats"][0], out["0"][1] == out["stats"][1], stats


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--llvm", type=int, default=19, choices=(19, 22))
    ap.add_argument("--packages", help="comma-separated subset of the default corpus' packages")
    ap.add_argument("--jobs", type=int, default=2)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="mlopt-check-memo-"))
    cmds = commands(args.packages.split(",") if args.packages else None, work, args.llvm)
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        results = list(pool.map(lambda a: compile_both(args.llvm, work, *a),
                                [(k, cmd, cwd) for k, (_, cmd, cwd) in enumerate(cmds)]))
    logs_differ = [cmds[k][0] for k, r in enumerate(results) if not r[0]]
    objects_differ = [cmds[k][0] for k, r in enumerate(results) if not r[1]]
    hits, misses, unmemoized = (sum(r[2][j] for r in results) for j in range(3))
    print(f"LLVM {args.llvm} ({cmds[0][1][0]}): {len(cmds)} sources")
    print(f"training logs identical with the memo on and off: {len(cmds) - len(logs_differ)} of {len(cmds)}"
          + (f" (differ: {' '.join(logs_differ[:8])})" if logs_differ else ""))
    print(f"objects identical with the memo on and off: {len(cmds) - len(objects_differ)} of {len(cmds)}"
          + (f" (differ: {' '.join(objects_differ[:8])})" if objects_differ else ""))
    answered = hits / max(hits + misses + 2 * unmemoized, 1)
    print(f"memo: {hits} hits, {misses} misses, {unmemoized} call sites not memoized "
          f"({answered:.1%} of the analyses answered by the memo)")
    return 1 if logs_differ or objects_differ else 0


if __name__ == "__main__":
    sys.exit(main())
