"""Compile-time cost of the plugin in stock opt-19, as ratios measured in one run.

Corpus: every C file of the lz4, brotli, zstandard (zstd amalgamation) and
pycryptodome sdists (92 modules), pre-optimization bitcode from clang-19 -Oz.
Each module is compiled with `opt-19 -passes='default<Oz>'` under each
configuration below, interleaved, best of --reps runs per module; totals are
sums over modules.

  stock        stock opt-19
  plugin       plugin loaded, no model/log: stock heuristic and pipeline
  ml-advisor   LLVM's MLInlineAdvisor (feature extraction) + heuristic decisions
  log          + development-mode training log of every decision
  tflite       .tflite policy (random MLP over a real vocab) through LiteRT
  tflite-shadow  the same model evaluated at every decision, heuristic decisions
               applied (the model's cost without its decisions' effect)

Run:  python3 benchmarks/bench_plugin.py [--reps 3] [--limit N]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
import corpus  # noqa: E402

import mlopt  # noqa: E402
from mlopt.plugin import plugin_path  # noqa: E402


def run(cmd):
    start = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    return time.perf_counter() - start


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--limit", type=int, help="only the first N modules")
    args = ap.parse_args()

    work = Path(tempfile.mkdtemp(prefix="mlopt-bench-plugin-"))
    modules = corpus.corpus("clang-19", work, names=tuple(corpus.SDISTS))
    if args.limit:
        modules = modules[: args.limit]
    plugin = str(plugin_path())
    print(f"corpus: {len(modules)} modules ({sum(m.stat().st_size for m in modules) / 1e6:.1f} MB bitcode)")

    # A policy over a real vocab: heuristic traces of the corpus itself.
    logs = []
    for m in modules:
        log = work / f"{m.stem}.heuristic.log"
        subprocess.run(["opt-19", f"-load-pass-plugin={plugin}", f"-mlopt-inline-training-log={log}",
                        "-passes=default<Oz>", str(m), "-o", "/dev/null"], check=True)
        logs.append(log)
    traces = [mlopt.read_log(p) for p in logs]
    decisions = sum(len(t) for t in traces)
    vocab = mlopt.Vocab.from_logs(traces)
    policy = mlopt.InlinePolicy.random(vocab, hidden=(64, 64), seed=2)
    model = policy.export(work / "model")

    opt = ["opt-19"]
    load = [f"-load-pass-plugin={plugin}"]
    configs = {
        "stock": opt,
        "plugin": opt + load,
        "ml-advisor": opt + load + ["-mlopt-inline-ml-advisor"],
        "log": opt + load + [f"-mlopt-inline-training-log={work / 'bench.log'}"],
        "tflite": opt + load + [f"-mlopt-inline-model={model}"],
        "tflite-shadow": opt + load + [f"-mlopt-inline-model={model}", "-mlopt-inline-model-shadow"],
    }
    best = {name: np.full(len(modules), np.inf) for name in configs}
    for rep in range(args.reps):
        for i, m in enumerate(modules):
            for name, cmd in configs.items():
                t = run(cmd + ["-passes=default<Oz>", str(m), "-o", "/dev/null"])
                best[name][i] = min(best[name][i], t)
        print(f"  rep {rep + 1}/{args.reps} done", file=sys.stderr)

    # Policy evaluation cost in isolation: the same C++ runner, in process.
    loaded = mlopt.load_policy(model)
    rows = np.concatenate([np.stack([t[f][:, 0] for f in mlopt.inliner.FEATURES], axis=1) for t in traces])
    start = time.perf_counter()
    loaded.decide(rows)
    per_decision = (time.perf_counter() - start) / len(rows)
    start = time.perf_counter()
    mlopt.load_policy(model)
    load_s = time.perf_counter() - start

    total = {name: best[name].sum() for name in configs}
    print(f"\n{'config':<15}{'total s':>10}{'vs stock':>10}{'vs ml-advisor':>15}")
    for name in configs:
        print(f"{name:<15}{total[name]:>10.2f}{total[name] / total['stock']:>10.3f}"
              f"{total[name] / total['ml-advisor']:>15.3f}")
    per_module = {name: best[name] / best["stock"] for name in configs}
    print("\nper-module ratio vs stock (median / max):")
    for name in configs:
        print(f"  {name:<15}{np.median(per_module[name]):.3f} / {per_module[name].max():.3f}")
    print(f"\ndecisions in the corpus (heuristic run): {decisions}")
    print(f"LiteRT policy: {per_decision * 1e6:.1f} us per decision in process, "
          f"load+compile {load_s * 1e3:.1f} ms per process "
          f"({decisions * per_decision:.2f} s of evaluation over the corpus = "
          f"{decisions * per_decision / total['stock'] * 100:.2f}% of stock time)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
