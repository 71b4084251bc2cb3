"""Compile-time cost of the plugin in stock opt-19, as ratios measured in one run.

Corpus: every C file of the lz4, brotli, zstandard (zstd amalgamation) and
pycryptodome sdists (92 modules), pre-optimization bitcode from clang-19 -Oz.
Each module is compiled with `opt-19 -passes='default<Oz>'` under each
configuration below, interleaved, best of --reps runs per module; totals are
sums over modules.

  stock        stock opt-19
  plugin       plugin loaded, no model/log: stock heuristic and pipeline
  ml-advisor   the ML advisor (feature extraction) + heuristic decisions, with
               mlopt's feature upkeep (the default on LLVM 19 and 22)
  ml-advisor-llvm  the same with LLVM's upkeep (-mlopt-inline-features=llvm)
  log          + development-mode training log of every decision
  tflite       .tflite policy (random MLP over a real vocab) through LiteRT
  tflite-shadow  the same model evaluated at every decision, heuristic decisions
               applied (the model's cost without its decisions' effect)

Run:  python3 benchmarks/bench_plugin.py [--reps 3] [--limit N] [--quick]
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
from mlopt.problems import inlining


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--limit", type=int, help="only the first N modules")
    ap.add_argument("--quick", action="store_true", help=QUICK_HELP + ": lz4's 2 smallest modules, 1 round")
    args = ap.parse_args()
    if args.quick:
        args.reps, args.limit = 1, 2

    work = Path(tempfile.mkdtemp(prefix="mlopt-bench-plugin-"))
    names = QUICK_SDISTS if args.quick else SDISTS
    modules = bench_corpus(work, args.limit, names, smallest=args.quick)
    traces = heuristic_traces(modules, work)
    decisions = sum(len(t) for t in traces)
    model = random_policy(traces).export(work / "model")

    plugin = str(plugin_path())
    opt = ["opt-19"]
    load = [f"-load-pass-plugin={plugin}"]
    configs = {
        "stock": opt,
        "plugin": opt + load,
        "ml-advisor": opt + load + ["-mlopt-inline-ml-advisor"],
        "ml-advisor-llvm": opt + load + ["-mlopt-inline-ml-advisor", "-mlopt-inline-features=llvm"],
        "log": opt + load + [f"-mlopt-inline-training-log={work / 'bench.log'}",
                             "-mlopt-inline-training-log-overwrite"],
        "tflite": opt + load + [f"-mlopt-inline-model={model}"],
        "tflite-shadow": opt + load + [f"-mlopt-inline-model={model}", "-mlopt-inline-model-shadow"],
    }
    best = time_configs(modules, configs, args.reps)

    # Policy evaluation cost in isolation: the same C++ runner, in process.
    loaded = mlopt.load_policy(model)
    rows = np.concatenate([np.stack([t[f][:, 0] for f in inlining.FEATURES], axis=1) for t in traces])
    start = time.perf_counter()
    loaded.decide(rows)
    per_decision = (time.perf_counter() - start) / len(rows)
    start = time.perf_counter()
    mlopt.load_policy(model)
    load_s = time.perf_counter() - start

    print_ratios(best, ("stock", "ml-advisor-llvm"))
    stock_total = best["stock"].sum()
    print(f"\ndecisions in the corpus (heuristic run): {decisions}")
    print(f"LiteRT policy: {per_decision * 1e6:.1f} us per decision in process, "
          f"load+compile {load_s * 1e3:.1f} ms per process "
          f"({decisions * per_decision:.2f} s of evaluation over the corpus = "
          f"{decisions * per_decision / stock_total * 100:.2f}% of stock time)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
