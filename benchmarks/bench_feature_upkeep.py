"""Compile-time cost of shipping a policy: LLVM's feature upkeep vs mlopt's, in `clang-19 -Oz`.

Corpus: the default corpus' sources (`mlopt corpus fetch`'s pinned C and C++
sdists: lz4, brotli, zstd, pycryptodome, jsonnet, marisa-trie, ujson), each
compiled as that build compiles it (`clang-19`/`clang++-19 -Oz -c`, without
embedding bitcode), to an object that is thrown away. Configurations, run
interleaved (every module under every configuration, in a rotating order,
then the next module; --reps rounds), each module's time the best of its
rounds (user + sys CPU seconds of the compiler process):

  stock        stock clang -Oz
  so-llvm      the plugin with a compiled .so policy evaluated at every
               decision, the heuristic's decision applied (so the decisions,
               hence the code, are stock's: only the upkeep and the model
               evaluation are measured); LLVM's feature upkeep
  so-mlopt     the same with mlopt's upkeep (-mlopt-inline-features=mlopt)
  log-llvm     the plugin writing a training log (heuristic decisions), LLVM's upkeep
  log-mlopt    the same with mlopt's upkeep

Reported: total time vs stock (the headline), the median and the worst
module's ratio to stock, and the modules above +10%. The machine may be
shared: ratios are taken within one run, module by module.

Run:  python3 benchmarks/bench_feature_upkeep.py [--reps 3] [--limit N] [--packages lz4,jsonnet]
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import mlopt
from _common import random_policy
from mlopt.compiler.plugin import clang_flags
from mlopt.corpus import fetch
from mlopt.corpus.description import load_corpus


def commands(packages: list[str] | None, work: Path) -> list[tuple[str, list[str], str]]:
    """(name, clang command without output, directory) per source of the default corpus."""
    selected = [p for p in fetch.PACKAGES if not packages or p.name in packages]
    (work / "build").mkdir()
    entries = fetch.compile_commands(selected, fetch.cache_dir(), work / "build")
    out = []
    for e in entries:
        args = list(e["arguments"])
        i = args.index("-fembed-bitcode=all")
        del args[i - 1:i + 1]  # "-Xclang", "-fembed-bitcode=all"
        out.append((Path(e["output"]).name, args, e["directory"]))
    return out


def heuristic_equivalent_policy(work: Path) -> Path:
    """A compiled 64x64 MLP (.so) over a vocab of the corpus' own features."""
    report = fetch.fetch_corpus()  # the extracted default corpus (cached)
    mods = load_corpus(report.output, llvm=19)[::3]
    logs = [r.log for r in mlopt.compile_many(mods, codegen=False, threads=2)]
    model = random_policy(logs).export(work / "model")
    return mlopt.compile_policy(model, work / "policy.so")


def cpu_seconds(cmd: list[str], cwd: str) -> float:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(cmd, cwd=cwd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--limit", type=int, help="only the first N sources")
    ap.add_argument("--packages", help="comma-separated subset of the default corpus' packages")
    args = ap.parse_args()

    work = Path(tempfile.mkdtemp(prefix="mlopt-bench-upkeep-"))
    cmds = commands(args.packages.split(",") if args.packages else None, work)[:args.limit]
    so = heuristic_equivalent_policy(work)
    logs = work / "logs"

    def plugin(upkeep: str, **kw) -> list[str]:
        return clang_flags(llvm=19, **kw) + ["-mllvm", f"-mlopt-inline-features={upkeep}"]

    shadow = ["-mllvm", "-mlopt-inline-model-shadow"]
    configs = {
        "stock": [],
        "so-llvm": plugin("llvm", model=so) + shadow,
        "so-mlopt": plugin("mlopt", model=so) + shadow,
        "log-llvm": plugin("llvm", training_log=f"{logs}/llvm-%m.log", overwrite_log=True),
        "log-mlopt": plugin("mlopt", training_log=f"{logs}/mlopt-%m.log", overwrite_log=True),
    }
    names = list(configs)
    langs = {"c": 0, "c++": 0}
    for _, cmd, _ in cmds:
        langs["c++" if cmd[0].startswith("clang++") else "c"] += 1
    print(f"corpus: {len(cmds)} sources ({langs['c']} C, {langs['c++']} C++); configurations: {', '.join(names)}; "
          f"{args.reps} interleaved rounds, best per module; CPU s of the compiler (user + sys)")
    best = {n: np.full(len(cmds), np.inf) for n in names}
    start = time.time()
    for rep in range(args.reps):
        for i, (_, cmd, cwd) in enumerate(cmds):
            order = names[(i + rep) % len(names):] + names[:(i + rep) % len(names)]
            for n in order:
                c = [cmd[0], *configs[n], *cmd[1:], "-o", os.devnull]
                best[n][i] = min(best[n][i], cpu_seconds(c, cwd))
        print(f"  round {rep + 1}/{args.reps} done ({time.time() - start:.0f} s)", file=sys.stderr)

    stock = best["stock"]
    print(f"\n{'configuration':<12}{'total s':>9}{'vs stock':>10}{'median':>9}{'worst':>9}"
          "  worst module, modules > +10%")
    for n in names:
        r = best[n] / stock
        worst = int(np.argmax(r))
        over = [cmds[i][0] for i in np.flatnonzero(r > 1.10)]
        print(f"{n:<12}{best[n].sum():>9.2f}{best[n].sum() / stock.sum():>10.3f}{np.median(r):>9.3f}{r.max():>9.3f}"
              f"  {cmds[worst][0]}, {len(over)}{': ' + ' '.join(over[:6]) if over else ''}")
    for a, b in (("so-mlopt", "so-llvm"), ("log-mlopt", "log-llvm")):
        print(f"{a} / {b}: total {best[a].sum() / best[b].sum():.3f}, "
              f"median module {np.median(best[a] / best[b]):.3f}")
    print("\nlargest stock modules (CPU s) and their ratios:")
    for i in np.argsort(-stock)[:8]:
        print(f"  {cmds[i][0]:<40}{stock[i]:>7.2f}" + "".join(f"  {n} {best[n][i] / stock[i]:.3f}" for n in names[1:]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
