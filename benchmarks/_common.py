"""Shared by the compile-time benchmarks: the corpus, a realistic policy and a timing loop."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

# These benchmarks time LLVM 19's tools (opt-19, llc-19, clang-19) against mlopt:
# mlopt uses LLVM 19 too unless MLOPT_LLVM says otherwise.
os.environ.setdefault("MLOPT_LLVM", "19")
# Benchmarks are scripts run from a checkout: the test corpus builder is theirs too.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import mlopt  # noqa: E402
from mlopt.compiler.plugin import plugin_path  # noqa: E402
from tests.support import corpus  # noqa: E402


def bench_corpus(work: Path, limit: int | None = None, names=tuple(corpus.SDISTS)) -> list[Path]:
    """Every C file of the named sdists (default all four: lz4, brotli,
    zstandard and pycryptodome, 92 modules)."""
    modules = corpus.corpus("clang-19", work, names=names)
    modules = modules[:limit] if limit else modules
    print(f"corpus: {len(modules)} modules ({sum(m.stat().st_size for m in modules) / 1e6:.1f} MB bitcode)")
    return modules


def heuristic_traces(modules: list[Path], work: Path) -> list[mlopt.Log]:
    plugin = str(plugin_path())
    traces = []
    for m in modules:
        log = work / f"{m.stem}.heuristic.log"
        subprocess.run(["opt-19", f"-load-pass-plugin={plugin}", f"-mlopt-inline-training-log={log}",
                        "-passes=default<Oz>", str(m), "-o", "/dev/null"], check=True)
        traces.append(mlopt.read_log(log))
    return traces


def random_policy(traces: list[mlopt.Log]) -> mlopt.InlinePolicy:
    """A 64x64 MLP over the corpus' own vocab (seed 2)."""
    return mlopt.InlinePolicy.random(mlopt.Vocab.from_logs(traces), hidden=(64, 64), seed=2)


def time_configs(modules: list[Path], configs: dict[str, list[str]], reps: int) -> dict[str, np.ndarray]:
    """Best-of-`reps` wall time of `cmd -passes=default<Oz> module -o /dev/null`, interleaved."""
    best = {name: np.full(len(modules), np.inf) for name in configs}
    for rep in range(reps):
        for i, m in enumerate(modules):
            for name, cmd in configs.items():
                start = time.perf_counter()
                subprocess.run(cmd + ["-passes=default<Oz>", str(m), "-o", "/dev/null"], check=True,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
                best[name][i] = min(best[name][i], time.perf_counter() - start)
        print(f"  rep {rep + 1}/{reps} done", file=sys.stderr)
    return best


def print_ratios(best: dict[str, np.ndarray], baselines: tuple[str, ...]) -> None:
    total = {name: t.sum() for name, t in best.items()}
    header = f"{'config':<16}{'total s':>9}" + "".join(f"{'vs ' + b:>16}" for b in baselines)
    print("\n" + header)
    for name in best:
        print(f"{name:<16}{total[name]:>9.2f}" + "".join(f"{total[name] / total[b]:>16.3f}" for b in baselines))
    print("\nper-module ratio vs stock (median / max):")
    for name in best:
        r = best[name] / best["stock"]
        print(f"  {name:<16}{np.median(r):.3f} / {r.max():.3f}")
