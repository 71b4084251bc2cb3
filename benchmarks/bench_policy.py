"""Per-decision latency of the three policy forms and their end-to-end cost in opt-19.

One run measures, on the feature rows of real heuristic traces (92 modules of
lz4, brotli, zstd and pycryptodome):
  - per decision: the compiled .so and the LiteRT runner (both through the
    plugin's C++ PolicyModel, one row per evaluation) and the numpy forward
    pass (one row per call; and amortized over the whole batch);
  - end to end, `opt-19 -passes='default<Oz>'` totals over the corpus:
      stock, ml-advisor (LLVM's ML advisor + heuristic decisions: the feature
      extraction every policy form pays), tflite / compiled (the policy decides),
      tflite-shadow / compiled-shadow (the policy is evaluated at every decision,
      the heuristic's decision applied: the policy's cost alone).

Run:  python3 benchmarks/bench_policy.py [--reps 3] [--limit N] [--quick]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import mlopt
from _common import (
    QUICK_HELP,
    QUICK_SDISTS,
    SDISTS,
    bench_corpus,
    heuristic_traces,
    print_ratios,
    random_policy,
    time_configs,
)
from mlopt.compiler.plugin import plugin_path
from mlopt.problems.inlining import feature_matrix


def per_row(fn, rows: np.ndarray, min_seconds: float = 1.0) -> float:
    """Seconds per decision of fn(one_row_array)."""
    n, start = 0, time.perf_counter()
    while True:
        for r in rows:
            fn(r)
        n += len(rows)
        elapsed = time.perf_counter() - start
        if elapsed >= min_seconds:
            return elapsed / n


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--limit", type=int, help="only the first N modules")
    ap.add_argument("--quick", action="store_true", help=QUICK_HELP + ": lz4's 2 smallest modules, 1 round")
    args = ap.parse_args()
    if args.quick:
        args.reps, args.limit = 1, 2

    work = Path(tempfile.mkdtemp(prefix="mlopt-bench-policy-"))
    names = QUICK_SDISTS if args.quick else SDISTS
    modules = bench_corpus(work, args.limit, names, smallest=args.quick)
    traces = heuristic_traces(modules, work)
    policy = random_policy(traces)
    model = policy.export(work / "model")
    so = mlopt.compile_policy(model, work / "policy.so")
    rows = np.ascontiguousarray(np.concatenate([feature_matrix(t) for t in traces]), dtype=np.int64)
    print(f"decisions in the corpus (heuristic run): {len(rows)}")

    compiled, litert = mlopt.load_policy(so), mlopt.load_policy(model)
    assert np.array_equal(compiled.decide(rows), litert.decide(rows))
    assert np.array_equal(compiled.decide(rows), policy.decide(rows))

    def in_process(p):  # C++ loop, one evaluation per row
        start = time.perf_counter()
        p.decide(rows)
        return (time.perf_counter() - start) / len(rows)

    t_so = min(in_process(compiled) for _ in range(3))
    t_litert = min(in_process(litert) for _ in range(3))
    sample = rows[: min(len(rows), 2000)]
    t_numpy = per_row(lambda r: policy.decide(r[None, :]), sample)
    start = time.perf_counter()
    policy.decide(rows)
    t_numpy_batch = (time.perf_counter() - start) / len(rows)
    print("\nper decision (one row per evaluation):")
    print(f"  compiled .so      {t_so * 1e6:8.2f} us")
    print(f"  LiteRT runner     {t_litert * 1e6:8.2f} us   ({t_litert / t_so:.1f}x the compiled policy)")
    print(f"  numpy, per row    {t_numpy * 1e6:8.2f} us   ({t_numpy / t_so:.1f}x)")
    print(f"  numpy, batched    {t_numpy_batch * 1e6:8.2f} us   (whole corpus in one call)")

    plugin = str(plugin_path())
    base = ["opt-19", f"-load-pass-plugin={plugin}"]
    configs = {
        "stock": ["opt-19"],
        "ml-advisor": base + ["-mlopt-inline-ml-advisor"],
        "tflite": base + [f"-mlopt-inline-model={model}"],
        "compiled": base + [f"-mlopt-inline-model={so}"],
        "tflite-shadow": base + [f"-mlopt-inline-model={model}", "-mlopt-inline-model-shadow"],
        "compiled-shadow": base + [f"-mlopt-inline-model={so}", "-mlopt-inline-model-shadow"],
    }
    best = time_configs(modules, configs, args.reps)
    print_ratios(best, ("stock", "ml-advisor"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
